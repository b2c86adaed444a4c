"""``python -m deltamem``: the ``deltamem`` command (:mod:`deltamem_launch`, which runs
:mod:`deltamem.faces.cli.app`)."""

from deltamem_launch import main

if __name__ == "__main__":  # pragma: no cover
    main()
