"""Binary adapters between numpy float32 vectors and pgvector's ``vector`` type.

pgvector's binary wire format is ``int16 dim, int16 unused, dim x float32``, all big-endian.
Binary keeps vectors exact to the bit both ways (the text format would go through decimal
strings) and is cheap to load in bulk: one ``frombuffer`` per row.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from psycopg import Connection
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

from deltamem.errors import StoreError

_HEADER = struct.Struct(">HH")


class VectorDumper(Dumper):
    """numpy array -> ``vector`` (binary)."""

    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        vec = np.asarray(obj, dtype=">f4")
        if vec.ndim != 1:
            raise ValueError(f"a vector must be one-dimensional, got shape {vec.shape}")
        return _HEADER.pack(vec.shape[0], 0) + vec.tobytes()


class VectorLoader(Loader):
    """``vector`` (binary) -> float32 numpy array."""

    format = Format.BINARY

    def load(self, data: Buffer) -> Any:
        dim = int.from_bytes(bytes(data[:2]), "big")
        return np.frombuffer(data, dtype=">f4", count=dim, offset=4).astype(np.float32)


def register_vector_adapters(conn: Connection[Any]) -> None:
    """Teach ``conn`` to send numpy arrays as ``vector`` and read ``vector`` as numpy (binary).

    Raises:
        StoreError: the database has no ``vector`` type (pgvector is not installed).
    """
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise StoreError("the database has no 'vector' type: CREATE EXTENSION vector first")
    dumper = type("BoundVectorDumper", (VectorDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(np.ndarray, dumper)
    conn.adapters.register_loader(info.oid, VectorLoader)
