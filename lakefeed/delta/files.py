"""Data files of a Delta table, Spark-free: how tasks write them and how tasks read them back.

Writers split rows by partition values (Hive-style folders, partition columns not stored in the
file, as Delta does), compute statistics while writing, and remove their own files if anything
fails. Readers turn one file plus its partition values into Arrow batches of exactly the
schema Spark expects, filling columns the file predates with nulls.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import math
import os
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakefeed.core import storage
from lakefeed.delta import dv, mapping
from lakefeed.delta.mapping import ColumnMapping
from lakefeed.delta.stats import FileStats

if TYPE_CHECKING:
    from lakefeed.delta.log import DataFile

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
STAGING = "_lakefeed_staging"
"""Folder inside a table where Spark writes files before they are adopted; a leading
underscore hides it from Spark's and Delta's readers."""
# Row groups as big as Spark's (parquet.block.size 128 MB): small ones cost 3x in write time.
ROW_GROUP_ROWS = 1 << 20
ROW_GROUP_BYTES = 128 << 20
READ_BATCH_BYTES = 32 << 20
MIN_READ_BATCH_ROWS, MAX_READ_BATCH_ROWS = 4096, 1 << 18
_ESCAPE = set("\"#%'*/:=?\\{[]^\x7f") | {chr(c) for c in range(1, 32)}
# Streaming files name their writer and batch so uncommitted ones can be found and removed.
_STREAM_FILE = re.compile(r"^part-lf-(?P<app>[0-9a-f]{8})-b(?P<batch>\d+)-")


def stream_file_prefix(app_id: str, batch_id: int) -> str:
    return f"part-lf-{app_tag(app_id)}-b{batch_id:08d}-"


def stale_staging(root: str, older_than_s: float) -> list[str]:
    """Staging folders of writes whose driver died, older than ``older_than_s`` (for vacuum)."""
    folder = storage.join(root, STAGING)
    cutoff = time.time() - older_than_s
    found = [storage.join(folder, name) for name in storage.list_names(folder)]
    return [path for path in found if (storage.folder_mtime(path) or 0) < cutoff]


def app_tag(app_id: str) -> str:
    return app_id.replace("-", "")[:8].lower().ljust(8, "0")


def parse_stream_file(name: str) -> tuple[str, int] | None:
    """(app tag, batch id) of a file a lakefeed streaming write produced, else None."""
    found = _STREAM_FILE.match(name)
    return (found["app"], int(found["batch"])) if found else None


def escape_path_name(value: str) -> str:
    """Spark's escaping of partition values in folder names."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPE else c for c in value)


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""Java's spelling of the non-finite doubles, which delta-spark writes as partition values."""


def partition_string(value: Any) -> str | None:
    """A partition value as the Delta protocol serialises it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE[repr(value)]
    return str(value)


def parse_partition_value(text: str | None, dtype: pa.DataType) -> Any:
    """The typed value of a serialised partition value (inverse of ``partition_string``)."""
    if text is None or text == NULL_PARTITION:
        return None
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return text
    if text == "":
        return None
    if pa.types.is_boolean(dtype):
        return text.lower() == "true"
    if pa.types.is_integer(dtype):
        return int(text)
    if pa.types.is_floating(dtype):
        return float(text)
    if pa.types.is_decimal(dtype):
        return Decimal(text)
    if pa.types.is_date(dtype):
        return dt.date.fromisoformat(text[:10])
    if pa.types.is_timestamp(dtype):
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        if dtype.tz is not None:
            return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return value.replace(tzinfo=None)
    if pa.types.is_binary(dtype):
        return text.encode("latin-1")
    raise ValueError(f"unsupported partition column type {dtype}")


@dataclass(frozen=True)
class WrittenFile:
    """One data file a task wrote: everything the driver needs for its ``add`` action."""

    path: str  # relative to the table root, as on disk (delta-rs URL-encodes it in the log)
    size: int
    partition_values: dict[str, str | None]
    modification_time: int
    stats: str
    rows: int


class _OpenFile:
    def __init__(self, root: str, relative: str, schema: pa.Schema, values: dict) -> None:
        self.relative = relative
        self.values = values
        self.local = storage.join(root, relative)
        fs, path = storage.filesystem(self.local)
        if not storage.is_object_store(root):
            os.makedirs(os.path.dirname(path), exist_ok=True)
        self.writer = pq.ParquetWriter(path, schema, compression="snappy", filesystem=fs)
        self.stats = FileStats(schema)
        self.pending: list[pa.Table] = []
        self.pending_rows = self.pending_bytes = 0

    def write(self, table: pa.Table) -> None:
        # Spark hands Arrow batches of ~10k rows: buffer them into row groups of a useful size.
        self.pending.append(table)
        self.pending_rows += table.num_rows
        self.pending_bytes += table.nbytes
        if self.pending_rows >= ROW_GROUP_ROWS or self.pending_bytes >= ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            table = pa.concat_tables(self.pending)
            self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
            self.stats.add(table)
            self.pending, self.pending_rows, self.pending_bytes = [], 0, 0

    def close(self) -> WrittenFile:
        self.flush()
        self.writer.close()
        return WrittenFile(
            path=self.relative,
            size=storage.size(self.local),
            partition_values=self.values,
            modification_time=now_ms(),
            stats=self.stats.to_json(),
            rows=self.stats.rows,
        )


def _matches(column: pa.ChunkedArray, value: Any) -> pa.ChunkedArray:
    """Rows of ``column`` holding the partition value ``value`` (a null, a NaN: which equal
    nothing, not even themselves)."""
    if value is None:
        return pc.is_null(column)
    if isinstance(value, float) and math.isnan(value):
        return pc.fill_null(pc.is_nan(column), False)
    return pc.fill_null(pc.equal(column, value), False)


class TableFileWriter:
    """Writes one task's rows into Parquet files under ``root`` (one per partition value)."""

    def __init__(
        self, root: str, schema: pa.Schema, partition_by: Sequence[str], prefix: str
    ) -> None:
        self.root = root
        self.partition_by = list(partition_by)
        self.data_schema = pa.schema([f for f in schema if f.name not in self.partition_by])
        self.prefix = prefix
        self.open: dict[tuple, _OpenFile] = {}

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        table = pa.Table.from_batches([batch])
        if not self.partition_by:
            self._file(()).write(table.select(self.data_schema.names))
            return
        keys = table.select(self.partition_by).group_by(self.partition_by).aggregate([])
        for key in keys.to_pylist():
            mask = None
            for name in self.partition_by:
                test = _matches(table.column(name), key[name])
                mask = test if mask is None else pc.and_(mask, test)
            part = table.filter(mask).select(self.data_schema.names)
            self._file(tuple(partition_string(key[n]) for n in self.partition_by)).write(part)

    def _file(self, key: tuple) -> _OpenFile:
        handle = self.open.get(key)
        if handle is None:
            folders = [
                f"{n}={NULL_PARTITION if v is None else escape_path_name(v)}"
                for n, v in zip(self.partition_by, key, strict=True)
            ]
            name = f"{self.prefix}{uuid.uuid4()}.c000.snappy.parquet"
            relative = "/".join([*folders, name])
            values = dict(zip(self.partition_by, key, strict=True))
            handle = _OpenFile(self.root, relative, self.data_schema, values)
            self.open[key] = handle
        return handle

    def close(self) -> list[WrittenFile]:
        try:
            return [handle.close() for handle in self.open.values()]
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Remove every file this writer started: a failed task leaves nothing behind."""
        for handle in self.open.values():
            with contextlib.suppress(Exception):
                handle.writer.close()
            storage.remove(handle.local)
        self.open.clear()


def write_batches(
    root: str,
    batches: Iterator[pa.RecordBatch],
    partition_by: Sequence[str],
    prefix: str,
    schema: pa.Schema | None = None,
) -> list[WrittenFile]:
    """Write a task's batches; on any failure its files are removed before the error escapes."""
    writer: TableFileWriter | None = None
    try:
        for batch in batches:
            if writer is None:
                writer = TableFileWriter(root, schema or batch.schema, partition_by, prefix)
            writer.write(batch)
        return writer.close() if writer is not None else []
    except BaseException:
        if writer is not None:
            writer.abort()
        raise


def remove_files(root: str, files: Sequence[WrittenFile]) -> None:
    """Delete written files that will not be (or were not) committed; gone already is fine."""
    for written in files:
        storage.remove(storage.join(root, written.path))


def local_path(root: str, log_path: str) -> str:
    """The location of a file the Delta log names (log paths are URL-encoded; absolute ones are
    URIs: ``file://`` becomes a local path, object-store URIs stay as they are)."""
    if storage.is_object_store(log_path):
        return unquote(log_path)
    if "://" in log_path:
        return unquote(log_path.split("://", 1)[1])
    return storage.join(root, unquote(log_path))


def batch_rows(metadata: pq.FileMetaData) -> int:
    """Rows per Arrow batch handed to Spark: about READ_BATCH_BYTES of decoded data.

    Each batch crosses from the Python worker to the JVM as one Arrow message, so fewer,
    larger batches cost less; a byte budget keeps wide rows from making huge ones.
    """
    rows = metadata.num_rows
    decoded = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    if rows == 0 or decoded == 0:
        return MAX_READ_BATCH_ROWS
    return max(MIN_READ_BATCH_ROWS, min(MAX_READ_BATCH_ROWS, READ_BATCH_BYTES * rows // decoded))


def read_file(
    root: str,
    file: DataFile,
    target: pa.Schema,
    columns: ColumnMapping | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of one data file as batches of exactly ``target`` (Spark's Arrow schema):
    columns found by physical name or field id under column mapping (``columns``), rows its
    deletion vector deletes left out."""
    fs, path = storage.filesystem(local_path(root, file.path))
    parquet = pq.ParquetFile(fs.open_input_file(path))
    sources = _sources(parquet.schema_arrow, target, file.partition_values, columns)
    deleted = None if file.deletes is None else dv.positions(root, file.deletes)
    conform = functools.partial(
        _conform,
        partition_values=file.partition_values,
        target=target,
        sources=sources,
        columns=columns,
    )
    start = 0
    for batch in parquet.iter_batches(
        batch_size=batch_rows(parquet.metadata), columns=list(sources.values())
    ):
        yield from _kept(conform(batch, batch.num_rows), deleted, start)
        start += batch.num_rows
    if start == 0 and not sources and parquet.metadata.num_rows:
        # Only partition columns are wanted: the rows still count.
        yield from _kept(conform(None, parquet.metadata.num_rows), deleted, 0)


def _sources(
    schema: pa.Schema,
    target: pa.Schema,
    partition_values: Mapping[str, str | None],
    columns: ColumnMapping | None,
) -> dict[str, str]:
    """Each wanted column (logical name) to the file's column holding it."""
    if columns is not None and columns.active:
        found = mapping.file_columns(columns, schema)
    else:
        found = {name: name for name in schema.names}
    return {
        f.name: found[f.name] for f in target if f.name in found and f.name not in partition_values
    }


def _kept(
    batch: pa.RecordBatch, deleted: np.ndarray | None, start: int
) -> Iterator[pa.RecordBatch]:
    """``batch`` (rows ``start``... of its file) without the rows ``deleted`` names."""
    if deleted is None:
        yield batch
        return
    end = start + batch.num_rows
    lo, hi = np.searchsorted(deleted, [start, end])
    if lo == hi:
        yield batch
        return
    keep = np.ones(batch.num_rows, dtype=bool)
    keep[(deleted[lo:hi] - np.uint64(start)).astype(np.int64)] = False
    if keep.any():
        yield batch.filter(pa.array(keep))


def _conform(
    batch: pa.RecordBatch | None,
    rows: int,
    partition_values: Mapping[str, str | None],
    target: pa.Schema,
    sources: Mapping[str, str],
    columns: ColumnMapping | None,
) -> pa.RecordBatch:
    arrays = []
    for field in target:
        if field.name in partition_values:
            value = parse_partition_value(partition_values[field.name], field.type)
            arrays.append(pa.repeat(pa.scalar(value, type=field.type), rows))
        elif batch is not None and field.name in sources:
            column = batch.column(sources[field.name])
            arrays.append(_logical(column, field, columns))
        else:
            arrays.append(pa.nulls(rows, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _logical(column: pa.Array, field: pa.Field, columns: ColumnMapping | None) -> pa.Array:
    if columns is not None and columns.active:
        described = next(c for c in columns.columns if c.name == field.name)
        return mapping.to_logical(column, described, field.type, columns.by_id)
    return column if column.type == field.type else column.cast(field.type)


def now_ms() -> int:
    return int(time.time() * 1000)
