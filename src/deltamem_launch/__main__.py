"""``python -m deltamem_launch ARGS``: the same as the ``deltamem`` command."""

from deltamem_launch import main

main()
