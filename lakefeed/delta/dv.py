"""Deletion vectors: the rows of a data file a Delta table has deleted without rewriting it,
Spark-free.

A ``deletionVector`` descriptor on an ``add`` names a 64-bit RoaringBitmap of row positions
(PROTOCOL.md, "Deletion Vectors"): inline in the log (``i``, Z85 text), or in a file beside the
data (``u``: a path derived from a UUID, ``p``: an absolute path) at ``offset``, framed by its
size and a CRC-32. The bitmap is Delta's ``RoaringBitmapArray``: a magic number, then the
portable 64-bit Roaring format, which pyroaring's ``BitMap64`` reads as it is.

Two sources, one result (the sorted deleted positions of a file, :func:`positions`):

- a snapshot's files (a batch read, a stream's initial snapshot) take their deletion vectors
  from delta-rs's ``DeltaTable.deletion_vectors()``: delta-rs replays the log (checkpoints of
  every kind, sidecars) and does not hand out the descriptors themselves;
- the ``add`` actions of single commits (a stream's incremental batches) carry descriptors,
  decoded here with pyroaring: asking delta-rs would mean opening the snapshot of every
  commit a micro-batch reads and decoding every deletion vector of the table each time.

tests/delta/test_foreign_tables.py checks that both agree on tables shaped as delta-spark writes
them, made at test time from the protocol.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
from pyroaring import BitMap, BitMap64

from lakefeed.core import storage
from lakefeed.delta.errors import DV_CORRUPT as CORRUPT
from lakefeed.delta.errors import DeletionVectorError

MAGIC = 1681511377
"""The first four bytes (little endian) of a serialised ``RoaringBitmapArray``."""
NATIVE_MAGIC = 1681511376
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
_UUID_CHARS = 20  # a UUID's 16 bytes in Z85


@dataclass(frozen=True)
class Descriptor:
    """A ``deletionVector`` of an ``add`` action (its JSON fields, named as in the protocol)."""

    storage_type: str
    path_or_inline: str
    size: int
    cardinality: int
    offset: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Descriptor | None:
        if not data:
            return None
        offset = data.get("offset")
        return cls(
            str(data["storageType"]),
            str(data["pathOrInlineDv"]),
            int(data["sizeInBytes"]),
            int(data["cardinality"]),
            None if offset is None else int(offset),
        )

    @property
    def unique_id(self) -> str:
        """The protocol's ``uniqueId``: a file with another DV is another logical file."""
        base = f"{self.storage_type}{self.path_or_inline}"
        return base if self.offset is None else f"{base}@{self.offset}"

    def location(self, root: str) -> str:
        """Where an on-disk DV is stored (``u``: ``<root>/<prefix>/deletion_vector_<uuid>.bin``)."""
        if self.storage_type == "p":
            # Load order: delta.files imports this module.
            from lakefeed.delta.files import local_path

            return local_path(root, self.path_or_inline)
        if self.storage_type != "u":
            raise _corrupt(self, f"storage type {self.storage_type!r} is not stored in a file")
        text = self.path_or_inline
        prefix, encoded = text[:-_UUID_CHARS], text[-_UUID_CHARS:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        return storage.join(root, prefix, name) if prefix else storage.join(root, name)


def z85_decode(text: str) -> bytes:
    """Z85 (ZeroMQ's Base85) text as bytes; its length must be a multiple of 5."""
    if len(text) % 5:
        raise ValueError(f"Z85 text of length {len(text)} is not a multiple of 5")
    out = bytearray()
    for start in range(0, len(text), 5):
        value = 0
        for char in text[start : start + 5]:
            value = value * 85 + _Z85_VALUE[char]
        out += value.to_bytes(4, "big")
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """``data`` (a multiple of 4 bytes long) as Z85 text: the inverse of :func:`z85_decode`."""
    if len(data) % 4:
        raise ValueError(f"Z85 encodes whole 4-byte words, not {len(data)} bytes")
    out = []
    for start in range(0, len(data), 4):
        value = int.from_bytes(data[start : start + 4], "big")
        word = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            word.append(_Z85[digit])
        out.append("".join(reversed(word)))
    return "".join(out)


def serialize(rows: BitMap64) -> bytes:
    """``rows`` as a ``RoaringBitmapArray`` in the protocol's portable format (its magic
    number, then the portable 64-bit Roaring format pyroaring writes)."""
    return struct.pack("<i", MAGIC) + rows.serialize()


@dataclass(frozen=True)
class Positions:
    """Deleted row positions already decoded (delta-rs's answer for a snapshot's file), as
    little-endian ``uint64`` bytes: small to pickle to a task, hashable."""

    raw: bytes

    @classmethod
    def of(cls, values: np.ndarray) -> Positions:
        return cls(np.ascontiguousarray(values, dtype="<u8").tobytes())

    def array(self) -> np.ndarray:
        return np.frombuffer(self.raw, dtype="<u8")


Deletes = Descriptor | Positions
"""What a data file's deleted rows are known by: a descriptor of the log, or decoded rows."""


def positions(root: str, deletes: Deletes) -> np.ndarray:
    """The sorted deleted row positions (``uint64``) of a file of the table at ``root``."""
    if isinstance(deletes, Positions):
        return deletes.array()
    rows = deleted_rows(root, deletes)
    return np.fromiter(rows, dtype=np.uint64, count=len(rows))


def snapshot_deletes(selection: pa.Table) -> dict[str, Positions]:
    """delta-rs's ``deletion_vectors()`` (a file URI, a selection vector: False = deleted; rows
    past its end are kept) as the deleted positions of each file, keyed by :func:`file_key`."""
    found = {}
    uris = selection.column("filepath").to_pylist()
    vectors = selection.column("selection_vector")
    for index, uri in enumerate(uris):
        kept = vectors[index].values.to_numpy(zero_copy_only=False)
        found[file_key(uri, encoded=True)] = Positions.of(np.flatnonzero(~kept))
    return found


def file_key(location: str, encoded: bool = False) -> str:
    """A data file's location in one spelling, whichever reader named it: delta-rs's
    percent-encoded URIs (``encoded``) and lakefeed's locations (local paths, ``s3a://``)."""
    if encoded:
        location = unquote(location)
    if location.startswith("file:"):
        return "/" + location[len("file:") :].lstrip("/")
    if location.startswith("s3a://"):
        return "s3://" + location[len("s3a://") :]
    return location


def deleted_rows(root: str, descriptor: Descriptor) -> BitMap64:
    """The row positions ``descriptor`` deletes from its file (checked against its cardinality,
    and an on-disk one against its size and checksum)."""
    if descriptor.storage_type == "i":
        data = _inline_bytes(descriptor)
    elif descriptor.storage_type in ("u", "p"):
        data = _stored_bytes(root, descriptor)
    else:
        raise _corrupt(descriptor, f"unknown storage type {descriptor.storage_type!r}")
    rows = _bitmap(descriptor, data)
    if len(rows) != descriptor.cardinality:
        raise _corrupt(
            descriptor, f"it holds {len(rows)} rows, the log says {descriptor.cardinality}"
        )
    return rows


def _inline_bytes(descriptor: Descriptor) -> bytes:
    try:
        return z85_decode(descriptor.path_or_inline)[: descriptor.size]
    except (KeyError, ValueError) as exc:
        raise _corrupt(descriptor, f"its inline data is not Z85 ({exc})") from None


def _stored_bytes(root: str, descriptor: Descriptor) -> bytes:
    """The DV's bytes in its file: ``<size: int32 BE><data><crc32: int32 BE>`` at ``offset``."""
    path = descriptor.location(root)
    try:
        blob = storage.read_bytes(path)
    except FileNotFoundError:
        raise _corrupt(descriptor, f"its file {path} is missing") from None
    offset = descriptor.offset or 0
    if len(blob) < offset + 8 + descriptor.size:
        raise _corrupt(descriptor, f"{path} ends before the {descriptor.size} bytes at {offset}")
    (size,) = struct.unpack_from(">i", blob, offset)
    data = blob[offset + 4 : offset + 4 + size]
    (checksum,) = struct.unpack_from(">I", blob, offset + 4 + size)
    if size != descriptor.size or zlib.crc32(data) != checksum:
        raise _corrupt(descriptor, f"the size or checksum at offset {offset} of {path} is wrong")
    return data


def _bitmap(descriptor: Descriptor, data: bytes) -> BitMap64:
    """A ``RoaringBitmapArray`` in either of delta-spark's formats: portable (the protocol's,
    magic 1681511377 little endian) or native (magic 1681511376 big endian, then the count of
    32-bit bitmaps, each as its size and its bytes; the protocol's inline example uses it)."""
    try:
        if data[:4] == struct.pack("<i", MAGIC):
            return BitMap64.deserialize(data[4:])
        if data[:4] == struct.pack(">i", NATIVE_MAGIC):
            return _native(data)
    except Exception as exc:  # pyroaring raises ValueError or its own errors on bad input
        raise _corrupt(descriptor, f"its bitmap does not decode ({exc})") from None
    raise _corrupt(descriptor, "it does not start with a RoaringBitmapArray magic number")


def _native(data: bytes) -> BitMap64:
    (count,) = struct.unpack_from(">i", data, 4)
    offset, rows = 8, BitMap64()
    for high in range(count):
        (size,) = struct.unpack_from(">i", data, offset)
        low = BitMap.deserialize(data[offset + 4 : offset + 4 + size])
        rows.update(np.fromiter(low, dtype=np.uint64, count=len(low)) + np.uint64(high << 32))
        offset += 4 + size
    return rows


def _corrupt(descriptor: Descriptor, why: str) -> DeletionVectorError:
    return DeletionVectorError(
        f"the deletion vector {descriptor.unique_id} cannot be read: {why}",
        fix="check the table with the writer that made it (delta-spark: REORG TABLE ... APPLY "
        "(PURGE) rewrites files without deletion vectors)",
        code=CORRUPT,
    )
