"""``python -m deltamem``: the ``deltamem`` command (:mod:`deltamem.faces.cli.app`)."""

from deltamem.faces.cli.app import main

if __name__ == "__main__":  # pragma: no cover
    main()
