"""Delta tables shaped as delta-spark writes them, made at test time from Delta's PROTOCOL.md.

lakefeed must read tables it did not write. These are made here without lakefeed's own writer
code (pyarrow, json, zlib, pyroaring and uuid only), laid out as delta-spark lays them out:
deletion vectors in ``deletion_vector_<uuid>.bin`` files (a version byte, then per vector its
size, the bitmap and a CRC-32, all big-endian framing around a little-endian magic number and
the portable 64-bit Roaring format) or inline in the log as Z85 text; column mapping with
physical names in the Parquet files, field ids, statistics and partition values keyed by
physical name; timestampNtz; classic, multi-part and v2 checkpoints (sidecars). Every table is
checked against delta-rs's kernel reader in ``test_foreign_tables.py``, so the maker cannot be
silently wrong.

:func:`make_all` writes each table of :data:`TABLES` under one folder, named by its key.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import random
import struct
import uuid
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: commit n is n minutes later
DV_MAGIC = 1681511377
Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
MAPPING_ID = "delta.columnMapping.id"
PHYSICAL = "delta.columnMapping.physicalName"
FIELD_ID = b"PARQUET:field_id"


def z85(data: bytes) -> str:
    """ZeroMQ's Base85 of ``data`` (a multiple of 4 bytes), the protocol's encoding for inline
    deletion vectors and the UUIDs of on-disk ones."""
    out = []
    for start in range(0, len(data), 4):
        value = int.from_bytes(data[start : start + 4], "big")
        digits = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            digits.append(Z85[digit])
        out.append("".join(reversed(digits)))
    return "".join(out)


def bitmap_bytes(rows: Iterable[int]) -> bytes:
    """A ``RoaringBitmapArray``: the magic number, then the portable 64-bit Roaring format."""
    return struct.pack("<i", DV_MAGIC) + BitMap64(rows).serialize()


# -- schemas ---------------------------------------------------------------------------------


def delta_type(kind: pa.DataType) -> Any:
    """The Delta schema type of an Arrow type (nested fields without mapping metadata)."""
    simple = {
        pa.int8(): "byte",
        pa.int16(): "short",
        pa.int32(): "integer",
        pa.int64(): "long",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.string(): "string",
        pa.binary(): "binary",
        pa.date32(): "date",
        pa.timestamp("us", "UTC"): "timestamp",
        pa.timestamp("us"): "timestamp_ntz",
    }
    if kind == VARIANT:
        return "variant"
    if kind in simple:
        return simple[kind]
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if pa.types.is_struct(kind):
        fields = [delta_field(kind.field(i)) for i in range(kind.num_fields)]
        return {"type": "struct", "fields": fields}
    if pa.types.is_list(kind):
        item = kind.value_field
        return {"type": "array", "elementType": delta_type(item.type), "containsNull": True}
    if pa.types.is_map(kind):
        return {
            "type": "map",
            "keyType": delta_type(kind.key_type),
            "valueType": delta_type(kind.item_type),
            "valueContainsNull": True,
        }
    raise TypeError(f"no Delta type for {kind}")


def delta_field(item: pa.Field) -> dict:
    return {"name": item.name, "type": delta_type(item.type), "nullable": True, "metadata": {}}


VARIANT = pa.struct([("metadata", pa.binary()), ("value", pa.binary())])
"""A variant column's Parquet shape (the Variant binary encoding's metadata and value)."""


@dataclass
class Mapping:
    """Column mapping as delta-spark assigns it: ids in schema order (nested struct fields
    too), physical names ``col-<uuid>``; ``mode`` None is no mapping."""

    mode: str | None
    rng: random.Random
    max_id: int = 0
    physical: dict[tuple[str, ...], tuple[str, int]] = field(default_factory=dict)

    def annotate(self, fields: list[dict], path: tuple[str, ...] = ()) -> None:
        """Give each struct field (depth first) its id and physical name, in place."""
        for item in fields:
            here = (*path, item["name"])
            if self.mode is not None:
                self.max_id += 1
                name = f"col-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"
                item["metadata"] = {MAPPING_ID: self.max_id, PHYSICAL: name}
                self.physical[here] = (name, self.max_id)
            for nested in _struct_children(item["type"]):
                self.annotate(nested, here)

    def name(self, *path: str) -> str:
        return self.physical[path][0] if self.mode else path[-1]

    def arrow(self, item: pa.Field, path: tuple[str, ...] = ()) -> pa.Field:
        """``item`` as stored in Parquet: physical names and field ids."""
        here = (*path, item.name)
        if self.mode is None:
            return item
        name, ident = self.physical.get(here, (item.name, None))
        kind = self._arrow_type(item.type, here)
        metadata = {FIELD_ID: str(ident).encode()} if ident is not None else None
        return pa.field(name, kind, item.nullable, metadata)

    def _arrow_type(self, kind: pa.DataType, path: tuple[str, ...]) -> pa.DataType:
        if pa.types.is_struct(kind) and kind != VARIANT:
            return pa.struct([self.arrow(kind.field(i), path) for i in range(kind.num_fields)])
        if pa.types.is_list(kind):
            return pa.list_(self._arrow_type(kind.value_type, path))
        if pa.types.is_map(kind):
            key = self._arrow_type(kind.key_type, path)
            return pa.map_(key, self._arrow_type(kind.item_type, path))
        return kind


def _struct_children(kind: Any) -> list[list[dict]]:
    """The field lists of the structs inside a Delta type (through arrays and maps)."""
    if not isinstance(kind, dict):
        return []
    if kind["type"] == "struct":
        return [kind["fields"]]
    if kind["type"] == "array":
        return _struct_children(kind["elementType"])
    return _struct_children(kind["keyType"]) + _struct_children(kind["valueType"])


# -- statistics and partition values ---------------------------------------------------------


def _stat_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        text = value.isoformat(timespec="milliseconds")
        return text.replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def _bounds(column: pa.ChunkedArray) -> tuple[Any, Any] | None:
    """delta-spark's min and max of a column (timestamps cut to milliseconds, the max rounded
    up so that it stays a bound)."""
    kind = column.type
    if not (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_string(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
    ):
        return None
    values = [v for v in column.to_pylist() if v is not None]
    if not values:
        return None
    low, high = min(values), max(values)
    if isinstance(high, dt.datetime) and high.microsecond % 1000:
        high = high + dt.timedelta(microseconds=1000 - high.microsecond % 1000)
    if isinstance(low, dt.datetime):
        low = low - dt.timedelta(microseconds=low.microsecond % 1000)
    return _stat_value(low), _stat_value(high)


def _column_stats(
    columns: Iterable[tuple[str, pa.ChunkedArray]], physical: Callable[[tuple[str, ...]], str]
) -> tuple[dict, dict, dict]:
    """Minimums, maximums and null counts of ``columns`` (path, values), keyed by physical name
    at each level: a struct's fields nest under the struct's key, as delta-spark writes them.
    Lists, maps and variants have none."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for path, column in columns:
        key = physical(path)
        kind = column.type
        if pa.types.is_struct(kind) and kind != VARIANT:
            fields = column.combine_chunks().flatten()  # a null struct: null fields
            children = [
                ((*path, kind.field(i).name), pa.chunked_array([values]))
                for i, values in enumerate(fields)
            ]
            inner = _column_stats(children, physical)
            for found, into in zip(inner, (low, high, nulls), strict=True):
                if found:
                    into[key] = found
            continue
        if pa.types.is_nested(kind):
            continue
        nulls[key] = column.null_count
        bounds = _bounds(column)
        if bounds is not None:
            low[key], high[key] = bounds
    return low, high, nulls


def stats(data: pa.Table, physical: Callable[[tuple[str, ...]], str], tight: bool = True) -> str:
    """An ``add``'s ``stats`` JSON, keyed by physical names (nested struct fields too)."""
    columns = [((name,), data.column(name)) for name in data.column_names]
    low, high, nulls = _column_stats(columns, physical)
    record = {
        "numRecords": data.num_rows,
        "minValues": low,
        "maxValues": high,
        "nullCount": nulls,
        "tightBounds": tight,
    }
    return json.dumps(record)


def partition_text(value: Any) -> str | None:
    """A partition value as the log stores it (a timestamp_ntz with microseconds)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(value)


HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
"""The folder name of a null partition value."""


def _hive_escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in ':%/=#"\\' or ord(c) < 32 else c for c in text)


# -- one table -------------------------------------------------------------------------------


@dataclass
class TableMaker:
    """Writes one table's data files, deletion vectors, commits and checkpoints."""

    root: Path
    schema: pa.Schema
    partition_by: list[str] = field(default_factory=list)
    configuration: dict[str, str] = field(default_factory=dict)
    reader_features: list[str] | None = None
    writer_features: list[str] | None = None
    versions: tuple[int, int] = (1, 2)
    mode: str | None = None
    seed: int = 0
    version: int = -1
    live: dict[str, dict] = field(default_factory=dict)
    dv_prefix: str = ""
    in_commit_timestamps: bool = False
    """Each commit's time is its ``inCommitTimestamp``; its file time and ``timestamp`` then
    run backwards, so a reader that uses them finds the wrong version."""
    _bitmaps: dict[str, list[int]] = field(default_factory=dict)
    """The rows of each deletion vector written, by its descriptor."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.mapping = Mapping(self.mode, self.rng)
        self.fields = [delta_field(f) for f in self.schema]
        self.mapping.annotate(self.fields)
        (self.root / "_delta_log").mkdir(parents=True, exist_ok=True)

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)

    def _now(self, version: int) -> int:
        return START_MS + version * 60_000

    # actions

    def metadata(self) -> dict:
        configuration = dict(self.configuration)
        if self.mode:
            configuration["delta.columnMapping.mode"] = self.mode
            configuration["delta.columnMapping.maxColumnId"] = str(self.mapping.max_id)
        return {
            "id": str(uuid.UUID(int=self.seed + 1, version=4)),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": self.fields}),
            "partitionColumns": list(self.partition_by),
            "configuration": configuration,
            "createdTime": START_MS,
        }

    def protocol(self) -> dict:
        reader, writer = self.versions
        action: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
        if reader == 3:
            action["readerFeatures"] = self.reader_features or []
        if writer == 7:
            action["writerFeatures"] = self.writer_features or []
        return action

    def create(self, data: Iterable[pa.Table]) -> list[dict]:
        """Version 0: protocol, metadata and the files of ``data`` (each split by partition);
        the ``add`` of each file."""
        adds = [self.add(part) for chunk in data for part in self._by_partition(chunk)]
        actions = [{"protocol": self.protocol()}, {"metaData": self.metadata()}]
        self.commit("CREATE TABLE AS SELECT", actions + [{"add": a} for a in adds])
        return adds

    def append(self, data: pa.Table) -> int:
        adds = [self.add(part) for part in self._by_partition(data)]
        return self.commit("WRITE", [{"add": a} for a in adds])

    def _by_partition(self, data: pa.Table) -> list[pa.Table]:
        if not self.partition_by:
            return [data]
        keys = sorted(
            {tuple(r.values()) for r in data.select(self.partition_by).to_pylist()}, key=repr
        )
        rows = data.to_pylist()
        return [
            pa.Table.from_pylist(
                [r for r in rows if tuple(r[c] for c in self.partition_by) == key], data.schema
            )
            for key in keys
        ]

    def add(self, data: pa.Table) -> dict:
        """Writes ``data`` (one partition's rows, logical names) as a data file: its ``add``."""
        values = {c: data.column(c)[0].as_py() for c in self.partition_by}
        stored = data.drop_columns(self.partition_by)
        folder = "/".join(
            f"{self.mapping.name(c)}={_hive_escape(partition_text(v) or HIVE_NULL)}"
            for c, v in values.items()
        )
        name = f"part-{len(self.live):05d}-{self._uuid()}.c000.snappy.parquet"
        relative = f"{folder}/{name}" if folder else name
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        schema = pa.schema([self.mapping.arrow(f) for f in stored.schema])
        # Physical names change no layout: each column is viewed under its stored type.
        columns = [
            c.combine_chunks().view(f.type) for c, f in zip(stored.columns, schema, strict=True)
        ]
        pq.write_table(pa.Table.from_arrays(columns, schema=schema), target)
        path = quote(relative, safe="/=")
        add = {
            "path": path,
            "partitionValues": {self.mapping.name(c): partition_text(v) for c, v in values.items()},
            "size": target.stat().st_size,
            "modificationTime": START_MS,
            "dataChange": True,
            "stats": stats(stored, lambda path: self.mapping.name(*path)),
        }
        self.live[path] = add
        return add

    def commit(self, operation: str, actions: list[dict]) -> int:
        """Writes the next commit (commitInfo first); its file time is its timestamp."""
        self.version += 1
        stamp = self._now(self.version)
        info: dict[str, Any] = {"timestamp": stamp}
        if self.in_commit_timestamps:
            info["inCommitTimestamp"] = stamp
            stamp = info["timestamp"] = self._now(100 - self.version)
        info |= {"operation": operation, "engineInfo": "foreign-table-maker"}
        if self.version:
            info["readVersion"] = self.version - 1
        lines = [json.dumps({"commitInfo": info})] + [json.dumps(a) for a in actions]
        target = self.root / "_delta_log" / f"{self.version:020d}.json"
        target.write_text("\n".join(lines) + "\n")
        os.utime(target, (stamp / 1000, stamp / 1000))
        return self.version

    # deletion vectors

    def delete(self, deleted: dict[str, set[int]], storage: str = "u") -> int:
        """A DELETE as delta-spark writes it with deletion vectors: each touched file's
        ``remove`` and, unless every row is gone, its ``add`` with the union of its old and
        new deleted positions (all of one commit's on-disk vectors in one file)."""
        actions: list[dict] = []
        vectors: list[tuple[str, set[int]]] = []
        changes: list[dict] = []
        for path, rows in deleted.items():
            old = self.live.pop(path)
            if self.configuration.get("delta.enableChangeDataFeed") == "true":
                changes.append({"cdc": self._change_file(path, rows, old["partitionValues"])})
            every = set(self.positions(old)) | rows
            remove = {
                "path": path,
                "deletionTimestamp": self._now(self.version + 1),
                "dataChange": True,
                "extendedFileMetadata": True,
                "partitionValues": old["partitionValues"],
                "size": old["size"],
            }
            if old.get("deletionVector"):
                remove["deletionVector"] = old["deletionVector"]
            actions.append({"remove": remove})
            if len(every) < json.loads(old["stats"])["numRecords"]:
                vectors.append((path, every))
                self.live[path] = {**old, "stats": self._loose(old["stats"])}
        descriptors = self._store(vectors, storage)
        for (path, _), descriptor in zip(vectors, descriptors, strict=True):
            self.live[path]["deletionVector"] = descriptor
            actions.insert(0, {"add": self.live[path]})
        return self.commit("DELETE", actions + changes)

    def _change_file(self, path: str, rows: set[int], values: dict) -> dict:
        """The deleted ``rows`` of data file ``path`` as a ``_change_data`` file (its stored
        columns, physical names and field ids kept, and ``_change_type`` = ``delete``) in the
        file's partition folder: its ``cdc`` action."""
        data = pq.read_table(self.root / unquote(path)).take(sorted(rows))
        kinds = pa.array(["delete"] * len(rows))
        data = data.append_column("_change_type", kinds)
        folder = unquote(path).rpartition("/")[0]
        name = f"cdc-{len(self.live):05d}-{self._uuid()}.c000.snappy.parquet"
        relative = "/".join(p for p in ("_change_data", folder, name) if p)
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, target)
        return {
            "path": quote(relative, safe="/="),
            "partitionValues": values,
            "size": target.stat().st_size,
            "dataChange": False,
        }

    def positions(self, add: dict) -> list[int]:
        """The rows ``add``'s deletion vector deletes (as this maker wrote it)."""
        return list(self._bitmaps.get(json.dumps(add.get("deletionVector"), sort_keys=True), []))

    @staticmethod
    def _loose(text: str) -> str:
        return json.dumps({**json.loads(text), "tightBounds": False})

    def _store(self, vectors: list[tuple[str, set[int]]], storage: str) -> list[dict]:
        if storage == "i":
            found = [self._inline(rows) for _, rows in vectors]
        else:
            found = self._on_disk([rows for _, rows in vectors], storage)
        for (_, rows), descriptor in zip(vectors, found, strict=True):
            self._bitmaps[json.dumps(descriptor, sort_keys=True)] = sorted(rows)
        return found

    @staticmethod
    def _inline(rows: set[int]) -> dict:
        data = bitmap_bytes(sorted(rows))
        padded = data + b"\0" * (-len(data) % 4)
        return {
            "storageType": "i",
            "pathOrInlineDv": z85(padded),
            "sizeInBytes": len(data),
            "cardinality": len(rows),
        }

    def _on_disk(self, vectors: list[set[int]], storage: str) -> list[dict]:
        """One ``deletion_vector_<uuid>.bin``: a version byte, then each vector as its size
        (big-endian), its bytes and their CRC-32 (big-endian)."""
        ident = self._uuid()
        folder = self.root / self.dv_prefix
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"deletion_vector_{ident}.bin"
        blob = bytearray(b"\x01")
        found = []
        for rows in vectors:
            data = bitmap_bytes(sorted(rows))
            offset = len(blob)
            blob += struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
            where = (
                target.resolve().as_uri() if storage == "p" else self.dv_prefix + z85(ident.bytes)
            )
            found.append(
                {
                    "storageType": storage,
                    "pathOrInlineDv": where,
                    "offset": offset,
                    "sizeInBytes": len(data),
                    "cardinality": len(rows),
                }
            )
        target.write_bytes(bytes(blob))
        return found

    # checkpoints

    def snapshot_actions(self) -> list[dict]:
        """The state a checkpoint at the current version holds (no tombstones kept)."""
        return [{"protocol": self.protocol()}, {"metaData": self.metadata()}] + [
            {"add": a} for a in self.live.values()
        ]

    def checkpoint(self, parts: int = 1) -> None:
        """A classic checkpoint (``parts`` > 1: multi-part) and ``_last_checkpoint``."""
        actions = self.snapshot_actions()
        log = self.root / "_delta_log"
        if parts == 1:
            write_actions(log / f"{self.version:020d}.checkpoint.parquet", actions)
        else:
            for part in range(parts):
                name = f"{self.version:020d}.checkpoint.{part + 1:010d}.{parts:010d}.parquet"
                write_actions(log / name, actions[part::parts])
        last: dict[str, Any] = {"version": self.version, "size": len(actions)}
        if parts > 1:
            last["parts"] = parts
        (log / "_last_checkpoint").write_text(json.dumps(last))

    def v2_checkpoint(self, suffix: str, sidecars: int = 2) -> None:
        """A v2 checkpoint: a top-level JSON or Parquet file with ``checkpointMetadata``, the
        protocol, metadata and ``sidecar`` actions naming Parquet files of adds under
        ``_delta_log/_sidecars``; ``_last_checkpoint`` carries its ``v2Checkpoint`` block (the
        file, its non-file actions and its sidecars) as delta-spark writes it."""
        log = self.root / "_delta_log"
        (log / "_sidecars").mkdir(exist_ok=True)
        adds = [{"add": a} for a in self.live.values()]
        pointers = []
        for part in range(sidecars):
            name = f"{self._uuid()}.parquet"
            target = log / "_sidecars" / name
            write_actions(target, adds[part::sidecars])
            sidecar = {
                "path": name,
                "sizeInBytes": target.stat().st_size,
                "modificationTime": START_MS,
            }
            pointers.append({"sidecar": sidecar})
        top = [
            {"checkpointMetadata": {"version": self.version}},
            {"protocol": self.protocol()},
            {"metaData": self.metadata()},
            *pointers,
        ]
        name = f"{self.version:020d}.checkpoint.{self._uuid()}.{suffix}"
        if suffix == "json":
            (log / name).write_text("".join(json.dumps(a) + "\n" for a in top))
        else:
            write_actions(log / name, top)
        last = {
            "version": self.version,
            "size": len(top) + len(adds),
            "sizeInBytes": (log / name).stat().st_size,
            "numOfAddFiles": len(adds),
            "v2Checkpoint": {
                "path": name,
                "sizeInBytes": (log / name).stat().st_size,
                "modificationTime": START_MS,
                "nonFileActions": top[:3],
                "sidecarFiles": [p["sidecar"] for p in pointers],
            },
        }
        (log / "_last_checkpoint").write_text(json.dumps(last))


# -- checkpoint Parquet ----------------------------------------------------------------------

_TEXT_MAP = pa.map_(pa.string(), pa.string())
_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
CHECKPOINT_SCHEMA = pa.schema(
    [
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64())])),
        (
            "add",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("partitionValues", _TEXT_MAP),
                    ("size", pa.int64()),
                    ("modificationTime", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("stats", pa.string()),
                    ("deletionVector", _DV),
                ]
            ),
        ),
        (
            "remove",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("deletionTimestamp", pa.int64()),
                    ("dataChange", pa.bool_()),
                    ("deletionVector", _DV),
                ]
            ),
        ),
        (
            "metaData",
            pa.struct(
                [
                    ("id", pa.string()),
                    (
                        "format",
                        pa.struct([("provider", pa.string()), ("options", _TEXT_MAP)]),
                    ),
                    ("schemaString", pa.string()),
                    ("partitionColumns", pa.list_(pa.string())),
                    ("configuration", _TEXT_MAP),
                    ("createdTime", pa.int64()),
                ]
            ),
        ),
        (
            "protocol",
            pa.struct(
                [
                    ("minReaderVersion", pa.int32()),
                    ("minWriterVersion", pa.int32()),
                    ("readerFeatures", pa.list_(pa.string())),
                    ("writerFeatures", pa.list_(pa.string())),
                ]
            ),
        ),
        ("checkpointMetadata", pa.struct([("version", pa.int64())])),
        (
            "sidecar",
            pa.struct(
                [
                    ("path", pa.string()),
                    ("sizeInBytes", pa.int64()),
                    ("modificationTime", pa.int64()),
                ]
            ),
        ),
    ]
)


def _arrow_value(kind: pa.DataType, value: Any) -> Any:
    """A JSON action's value in the shape pyarrow builds ``kind`` from (maps as pairs)."""
    if value is None:
        return None
    if pa.types.is_map(kind):
        return list(value.items())
    if pa.types.is_struct(kind):
        return {
            kind.field(i).name: _arrow_value(kind.field(i).type, value.get(kind.field(i).name))
            for i in range(kind.num_fields)
        }
    return value


def write_actions(target: Path, actions: list[dict]) -> None:
    """Actions as a checkpoint's Parquet rows: one action per row, the other columns null."""
    columns = {
        name: [_arrow_value(CHECKPOINT_SCHEMA.field(name).type, a.get(name)) for a in actions]
        for name in CHECKPOINT_SCHEMA.names
    }
    pq.write_table(pa.table(columns, schema=CHECKPOINT_SCHEMA), target)


# -- the tables ------------------------------------------------------------------------------

DV_SCHEMA = pa.schema([("part", pa.int32()), ("col1", pa.int32()), ("col2", pa.string())])
DV_DELETES = [[3], [5, 17], [6], [24], [13], [16], [44], [26], [9], [19], [28], [35], [23]]
DV_DELETES += [[29, 47], [0]]
"""The ``col1`` values each DELETE commit (versions 1 to 15) removes. Partition ``p`` holds two
files, ``[p, p+10]`` and ``[p+20, p+30, p+40]``: versions 5, 6 and 10 delete the last rows of a
file (a ``remove`` alone), versions 2 and 14 touch two files at once."""
DV_CHECKPOINT = 10


def dv_rows(values: list[int]) -> pa.Table:
    """Rows of the deletion-vector tables: ``part`` is ``col1 % 10``."""
    return pa.table(
        {"part": [v % 10 for v in values], "col1": values, "col2": [f"row{v}" for v in values]},
        schema=DV_SCHEMA,
    )


def make_dv_table(
    root: Path, mode: str | None = None, inline_every: int = 0, change_feed: bool = False
) -> pa.Table:
    """delta-spark's partitioned table with ``delta.enableDeletionVectors``, then one DELETE
    per commit, each writing deletion vectors; a classic checkpoint at version 10.
    ``inline_every`` n > 0 stores the vectors of every n-th commit inline in the log;
    ``change_feed`` turns the change data feed on (each DELETE writes ``_change_data``)."""
    features = ["deletionVectors"] + (["columnMapping"] if mode else [])
    configuration = {"delta.enableDeletionVectors": "true"}
    if change_feed:
        configuration["delta.enableChangeDataFeed"] = "true"
    maker = TableMaker(
        root,
        DV_SCHEMA,
        ["part"],
        configuration,
        features,
        features + (["changeDataFeed"] if change_feed else []),
        (3, 7),
        mode,
        seed=(11 if mode else 10) + (100 if change_feed else 0),
    )
    chunks = [dv_rows([p, p + 10]) for p in range(10)]
    chunks += [dv_rows([p + 20, p + 30, p + 40]) for p in range(10)]
    adds = maker.create(chunks)
    where = {
        value: (add["path"], position)
        for chunk, add in zip(chunks, adds, strict=True)
        for position, value in enumerate(chunk.column("col1").to_pylist())
    }
    for version, values in enumerate(DV_DELETES, start=1):
        deleted: dict[str, set[int]] = {}
        for value in values:
            path, position = where[value]
            deleted.setdefault(path, set()).add(position)
        inline = inline_every and version % inline_every == 0
        maker.delete(deleted, "i" if inline else "u")
        if version == DV_CHECKPOINT:
            maker.checkpoint()
    gone = {value for values in DV_DELETES for value in values}
    return dv_rows([value for value in range(50) if value not in gone])


def make_dv_storage_kinds(root: Path) -> pa.Table:
    """Deletion vectors of every storage kind in one table: inline (``i``), on disk under a
    random prefix (``u``, ``<prefix>/deletion_vector_<uuid>.bin``) and by absolute path
    (``p``); the table cannot be moved (the ``p`` path names its own folder)."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    features = ["deletionVectors"]
    configuration = {"delta.enableDeletionVectors": "true"}
    maker = TableMaker(root, schema, [], configuration, features, features, (3, 7), seed=12)
    chunks = [
        pa.table({"id": range(s, s + 8), "name": [f"n{i}" for i in range(s, s + 8)]}, schema)
        for s in (0, 100, 200)
    ]
    adds = maker.create(chunks)
    maker.delete({adds[0]["path"]: {1, 5}}, "i")
    maker.dv_prefix = "q7"
    maker.delete({adds[1]["path"]: {0, 7}, adds[0]["path"]: {6}}, "u")
    maker.dv_prefix = ""
    maker.delete({adds[2]["path"]: {2, 3, 4}}, "p")
    gone = ({1, 5, 6}, {0, 7}, {2, 3, 4})
    kept = [c.filter([i not in g for i in range(8)]) for c, g in zip(chunks, gone, strict=True)]
    return pa.concat_tables(kept)


MAPPED_SCHEMA = pa.schema(
    [
        ("tiny", pa.int8()),
        ("small", pa.int16()),
        ("num", pa.int32()),
        ("big", pa.int64()),
        ("ratio", pa.float32()),
        ("amount", pa.float64()),
        ("price", pa.decimal128(10, 2)),
        ("flag", pa.bool_()),
        ("label", pa.string()),
        ("blob", pa.binary()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", "UTC")),
        ("nested", pa.struct([("tag", pa.string()), ("inner", pa.struct([("n", pa.int32())]))])),
        ("ints", pa.list_(pa.int32())),
        ("grid", pa.list_(pa.list_(pa.int32()))),
        ("items", pa.list_(pa.struct([("x", pa.int32()), ("y", pa.string())]))),
        ("lookup", pa.map_(pa.int32(), pa.int64())),
        ("by_key", pa.map_(pa.int32(), pa.struct([("v", pa.int64())]))),
        ("maps", pa.map_(pa.int64(), pa.map_(pa.int32(), pa.int32()))),
    ]
)


def _mapped_row(i: int) -> dict:
    return {
        "tiny": i,
        "small": i * 10,
        "num": i,
        "big": i * 1_000_000_000_000,
        "ratio": i / 4,
        "amount": i * 1.5,
        "price": decimal.Decimal(f"{i}.{i}5"),
        "flag": i % 2 == 0,
        "label": str(i),
        "blob": bytes([i, i + 1]),
        "day": dt.date(2025, 3, 1 + i),
        "at": dt.datetime(2025, 3, 1, 8, i, 30, 250_000 + i, tzinfo=dt.UTC),
        "nested": {"tag": f"t{i}", "inner": {"n": i * 7}},
        "ints": list(range(i)),
        "grid": [[i], [i, i + 1]],
        "items": [{"x": i, "y": f"y{i}"}],
        "lookup": [(i, i * 2)],
        "by_key": [(i, {"v": i * 3})],
        "maps": [(i, [(i, i + 9)])],
    }


def _two_files(maker: TableMaker, rows: list[dict], split: int) -> pa.Table:
    """``rows`` created as two files (before and from ``split``); the rows as a table."""
    chunks = [pa.Table.from_pylist(part, maker.schema) for part in (rows[:split], rows[split:])]
    maker.create(chunks)
    return pa.concat_tables(chunks)


def make_mapped_table(root: Path, mode: str) -> pa.Table:
    """Column mapping (``name`` or ``id``) over primitive and nested columns, reader 2 /
    writer 5 as delta-spark writes it; five rows and one row of nulls in two files."""
    maker = TableMaker(root, MAPPED_SCHEMA, [], {}, None, None, (2, 5), mode, seed=20)
    rows = [_mapped_row(i) for i in range(5)] + [dict.fromkeys(MAPPED_SCHEMA.names)]
    return _two_files(maker, rows, 3)


STATS_SCHEMA = pa.schema(
    [
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("text", pa.string()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", "UTC")),
        ("dec", pa.decimal128(5, 1)),
    ]
)


def _stats_row(i: int) -> dict:
    return {
        "i32": i,
        "i64": -i * 3,
        "i8": i - 3,
        "i16": i * 100,
        "f32": i + 0.5,
        "f64": i * -2.25,
        "text": f"s{i:02d}",
        "day": dt.date(2024, 12, 30) + dt.timedelta(days=i),
        "at": dt.datetime(2024, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.UTC) + dt.timedelta(hours=i),
        "dec": decimal.Decimal(f"{i}.{i}"),
    }


def make_stats_table(root: Path, mode: str) -> pa.Table:
    """Every primitive type with statistics (keyed by physical name) under column mapping."""
    maker = TableMaker(root, STATS_SCHEMA, [], {}, None, None, (2, 5), mode, seed=30)
    return _two_files(maker, [_stats_row(i) for i in range(7)] + [{}], 4)


NTZ_SCHEMA = pa.schema(
    [("id", pa.int32()), ("local_ts", pa.timestamp("us")), ("local_day", pa.timestamp("us"))]
)


def _ntz_row(i: int) -> dict:
    days = [dt.datetime(2019, 2, 3, 4, 5, 6, 789_012), dt.datetime(2024, 8, 9, 23, 0, 0, 1), None]
    moment = dt.datetime(2020, 1, 1) + dt.timedelta(days=i, microseconds=i * 1001)
    return {"id": i, "local_ts": None if i == 4 else moment, "local_day": days[i % 3]}


def make_ntz_table(root: Path, mode: str | None) -> pa.Table:
    """timestampNtz values and a timestampNtz partition column (a null partition too)."""
    features = ["timestampNtz"] + (["columnMapping"] if mode else [])
    maker = TableMaker(
        root, NTZ_SCHEMA, ["local_day"], {}, features, features, (3, 7), mode, seed=40
    )
    rows = [_ntz_row(i) for i in range(6)]
    maker.create([pa.Table.from_pylist(rows[:3], NTZ_SCHEMA)])
    maker.append(pa.Table.from_pylist(rows[3:], NTZ_SCHEMA))
    return pa.Table.from_pylist(rows, NTZ_SCHEMA)


ID_SCHEMA = pa.schema([("id", pa.int64())])


def _ids(start: int, count: int) -> pa.Table:
    return pa.table({"id": range(start, start + count)}, ID_SCHEMA)


def _grown_ids(maker: TableMaker) -> None:
    """Versions 0 to 3: three files, two more, the second removed."""
    adds = maker.create([_ids(0, 5), _ids(5, 5), _ids(10, 5)])
    maker.append(_ids(20, 5))
    maker.append(_ids(30, 5))
    maker.delete({adds[1]["path"]: set(range(5))})


IDS = pa.concat_tables([_ids(0, 5), _ids(10, 5), _ids(20, 5), _ids(30, 5), _ids(40, 3)])
"""The rows of the checkpoint tables: :func:`_grown_ids`, then ``40..42`` after the checkpoint."""


def make_multi_part_checkpoint(root: Path) -> pa.Table:
    """A classic checkpoint in three parts at version 3, then one more commit."""
    maker = TableMaker(root, ID_SCHEMA, seed=50)
    _grown_ids(maker)
    maker.checkpoint(parts=3)
    maker.append(_ids(40, 3))
    return IDS


def make_v2_checkpoint(root: Path, suffix: str) -> pa.Table:
    """A v2 checkpoint (top-level ``json`` or ``parquet``, two sidecars) at version 3, then one
    more commit."""
    features = ["v2Checkpoint"]
    configuration = {"delta.checkpointPolicy": "v2"}
    maker = TableMaker(root, ID_SCHEMA, [], configuration, features, features, (3, 7), seed=60)
    _grown_ids(maker)
    maker.v2_checkpoint(suffix)
    maker.append(_ids(40, 3))
    return IDS


def make_in_commit_timestamps(root: Path) -> pa.Table:
    """In-commit timestamps on from version 0 (a writer feature): commit n's time is
    ``START_MS`` + n minutes, while its file time and ``timestamp`` say 100 - n minutes."""
    configuration = {"delta.enableInCommitTimestamps": "true"}
    features = ["inCommitTimestamp"]
    maker = TableMaker(root, ID_SCHEMA, [], configuration, None, features, (1, 7), seed=65)
    maker.in_commit_timestamps = True
    _grown_ids(maker)
    maker.append(_ids(40, 3))
    return IDS


def make_vacuum_protocol_check(root: Path) -> pa.Table:
    """vacuumProtocolCheck: writers' VACUUM must check the protocol, readers do nothing."""
    schema = pa.schema([("id", pa.int32()), ("name", pa.string())])
    writer = ["appendOnly", "invariants", "vacuumProtocolCheck"]
    maker = TableMaker(root, schema, [], {}, ["vacuumProtocolCheck"], writer, (3, 7), seed=70)
    rows: list[dict] = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": None}]
    return _two_files(maker, rows, 2)


def _nested_ints(kind: pa.DataType) -> pa.Schema:
    return pa.schema(
        [("s", pa.struct([("a", kind)])), ("m", pa.map_(kind, kind)), ("l", pa.list_(kind))]
    )


def _nested_row(kind: pa.DataType, i: int) -> pa.Table:
    return pa.Table.from_pylist([{"s": {"a": i}, "m": [(i, i)], "l": [i]}], _nested_ints(kind))


def make_type_widening_preview(root: Path) -> pa.Table:
    """typeWidening-preview on nested fields: written as short, widened to integer (the
    ``delta.typeChanges`` field metadata), written again as integer."""
    features = ["typeWidening-preview"]
    configuration = {"delta.enableTypeWidening": "true"}
    short = _nested_ints(pa.int16())
    maker = TableMaker(root, short, [], configuration, features, features, (3, 7), seed=80)
    maker.create([_nested_row(pa.int16(), 1)])
    change = {"toType": "integer", "fromType": "short", "tableVersion": 1}
    maker.fields = [delta_field(f) for f in _nested_ints(pa.int32())]
    maker.fields[0]["type"]["fields"][0]["metadata"] = {"delta.typeChanges": [change]}
    maker.fields[1]["metadata"] = {
        "delta.typeChanges": [{**change, "fieldPath": path} for path in ("key", "value")]
    }
    maker.fields[2]["metadata"] = {"delta.typeChanges": [{**change, "fieldPath": "element"}]}
    maker.commit("CHANGE COLUMN", [{"metaData": maker.metadata()}])
    maker.append(_nested_row(pa.int32(), 70000))
    return pa.concat_tables([_nested_row(pa.int32(), 1), _nested_row(pa.int32(), 70000)])


def _variant_int(value: int) -> dict:
    """A variant holding a 1-byte integer (the Variant encoding: an empty dictionary as
    metadata, a primitive int8 header then the byte)."""
    return {"metadata": b"\x01\x00\x00", "value": bytes([3 << 2, value])}


def make_variant_preview(root: Path) -> pa.Table:
    """variantType-preview, three commits and a classic checkpoint at version 2."""
    schema = pa.schema([("id", pa.int64()), ("v", VARIANT)])
    reader, writer = ["variantType-preview"], ["variantType-preview", "appendOnly", "invariants"]
    maker = TableMaker(root, schema, [], {}, reader, writer, (3, 7), seed=90)
    rows = [{"id": i, "v": _variant_int(i)} for i in (1, 2, 3)]
    maker.create([pa.Table.from_pylist(rows[:1], schema)])
    for row in rows[1:]:
        maker.append(pa.Table.from_pylist([row], schema))
    maker.checkpoint()
    return pa.Table.from_pylist(rows, schema)


TABLES: dict[str, Callable[[Path], pa.Table]] = {
    "dv-partitioned": make_dv_table,
    "dv-column-mapping": lambda root: make_dv_table(root, "name", inline_every=2),
    "dv-storage-kinds": make_dv_storage_kinds,
    "dv-change-feed": lambda root: make_dv_table(root, "name", change_feed=True),
    "column-mapping-name": lambda root: make_mapped_table(root, "name"),
    "column-mapping-id": lambda root: make_mapped_table(root, "id"),
    "stats-all-types-name": lambda root: make_stats_table(root, "name"),
    "stats-all-types-id": lambda root: make_stats_table(root, "id"),
    "timestamp-ntz": lambda root: make_ntz_table(root, None),
    "timestamp-ntz-name": lambda root: make_ntz_table(root, "name"),
    "timestamp-ntz-id": lambda root: make_ntz_table(root, "id"),
    "multi-part-checkpoint": make_multi_part_checkpoint,
    "v2-checkpoint-json": lambda root: make_v2_checkpoint(root, "json"),
    "v2-checkpoint-parquet": lambda root: make_v2_checkpoint(root, "parquet"),
    "in-commit-timestamps": make_in_commit_timestamps,
    "vacuum-protocol-check": make_vacuum_protocol_check,
    "type-widening-preview": make_type_widening_preview,
    "variant-preview": make_variant_preview,
}


def make_all(folder: Path) -> dict[str, pa.Table]:
    """Every table of :data:`TABLES` under ``folder``; the rows each was made to hold."""
    return {name: make(folder / name) for name, make in TABLES.items()}
