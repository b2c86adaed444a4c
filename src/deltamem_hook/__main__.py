"""``python -m deltamem_hook EVENT``: the same as the ``deltamem-hook`` command."""

from deltamem_hook import main

main()
