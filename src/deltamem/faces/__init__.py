"""The faces: every way in from outside the Python process, each a thin layer over the facade.

* :mod:`.cli` -- the ``deltamem`` command (``app`` holds the commands and the error policy);
* :mod:`.server` -- the REST and MCP servers, API keys, rate limits, the tree viewer;
* :mod:`.skills` -- task-tree roots as ``SKILL.md`` folders, and back;
* :mod:`.worker` -- background consolidation of every space.

The other faces have public import paths of their own: ``deltamem.client`` (``Client``) and
``deltamem.integrations`` (agent frameworks). docs/architecture.md draws the layers.
"""
