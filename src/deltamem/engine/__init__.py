"""The engine: the read, write and consolidation paths that :class:`deltamem.DeltaMem` composes.

* :mod:`.read` -- :class:`~.read.Reader`: scan, batch fetch, ``core.ranking``, chain, compose;
* :mod:`.write` -- :class:`~.write.Writer`: extraction and placement outside the write lock,
  the writes inside it;
* :mod:`.consolidate` -- :class:`~.consolidate.Consolidator`: compiling due chains.

Each works on one space of a store with the rules of ``deltamem.core``; the facade owns the
write blocks, validation, embedding and usage.
"""
