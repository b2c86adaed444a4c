"""The ``deltamem`` command line (``app``: the commands, the entry point and its exit codes;
``options``: shared flags; ``output``: progress and text; ``serve`` and ``privacy``: the
commands registered from their own modules)."""
