"""The engine: the :class:`deltamem.DeltaMem` facade and the paths it composes.

* :mod:`.memory` -- :class:`~.memory.DeltaMem`: open and close, the write blocks, validation,
  embedding and usage; one short method per operation, composing:
* :mod:`.read` -- :class:`~.read.Reader`: scan, batch fetch, ``core.ranking``, chain, compose;
* :mod:`.write` -- :class:`~.write.Writer`: extraction and placement outside the write lock,
  the writes inside it;
* :mod:`.consolidate` -- :class:`~.consolidate.Consolidator`: compiling due chains;
* :mod:`.corrections` -- a correction from inside the agent, as a new root that supersedes;
* :mod:`.aio` -- :class:`~.aio.AsyncDeltaMem`, generated from the facade's methods;
* :mod:`.results` and :mod:`.reports` -- what the calls return, and ``stats`` / ``show``;
* :mod:`.calibrate` -- choosing a tree's threshold from labelled episodes.

Each works on one space of a store with the rules of ``deltamem.core``.
"""
