"""Per-file column statistics in Delta's ``stats`` JSON (numRecords, minValues, maxValues,
nullCount), so that readers (lakefeed, delta-rs, Spark) can skip files.

Bounds must never lie: a value we cannot bound exactly (long strings, floats with NaN,
timestamps below millisecond precision) is bounded loosely or left out, never guessed.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# Delta truncates string statistics to a 32-character prefix.
STRING_PREFIX = 32


def _has_bounds(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_integer(dtype)
        or pa.types.is_floating(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_date32(dtype)
        or pa.types.is_timestamp(dtype)
    )


@dataclass
class _Column:
    nulls: int = 0
    low: Any = None
    high: Any = None
    bounded: bool = True

    def add(self, array: pa.Array | pa.ChunkedArray) -> None:
        self.nulls += array.null_count
        if not self.bounded or not _has_bounds(array.type):
            self.bounded = False
            return
        if pa.types.is_floating(array.type) and pc.any(pc.is_nan(array)).as_py():
            self.bounded = False
            return
        found = pc.min_max(array)
        low, high = found["min"].as_py(), found["max"].as_py()
        if low is None:
            return
        self.low = low if self.low is None else min(self.low, low)
        self.high = high if self.high is None else max(self.high, high)


@dataclass
class FileStats:
    """Accumulates statistics of the record batches written to one file."""

    schema: pa.Schema
    rows: int = 0
    columns: dict[str, _Column] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Only top-level primitive columns: Delta keys a struct's figures by its fields (a
        # kernel reader refuses a struct's count given as one number), as footer_stats does.
        self.columns = {f.name: _Column() for f in self.schema if not pa.types.is_nested(f.type)}

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.rows += batch.num_rows
        for name, column in self.columns.items():
            column.add(batch.column(name))

    def to_json(self) -> str:
        low: dict[str, Any] = {}
        high: dict[str, Any] = {}
        for name, column in self.columns.items():
            if not column.bounded or column.low is None:
                continue
            bounds = _json_bounds(column.low, column.high)
            if bounds[0] is not None:
                low[name] = bounds[0]
            if bounds[1] is not None:
                high[name] = bounds[1]
        nulls = {name: column.nulls for name, column in self.columns.items()}
        return json.dumps(
            {"numRecords": self.rows, "minValues": low, "maxValues": high, "nullCount": nulls},
            separators=(",", ":"),
        )


def footer_stats(metadata: pq.FileMetaData, schema: pa.Schema) -> str:
    """The same statistics read from a Parquet footer instead of computed from the rows.

    For files another writer (Spark's JVM Parquet writer) produced: it records min, max and
    null count per row group. Only top-level primitive columns have footer figures; a NaN in a
    float column shows up as a NaN bound and leaves the column unbounded, as above.
    """
    leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    stats = FileStats(schema, rows=metadata.num_rows)
    for name in list(stats.columns):
        index = leaves.get(name)
        found = None if index is None else _footer_column(metadata, index, schema.field(name).type)
        if found is None:
            del stats.columns[name]  # no figure at all rather than a wrong one
        else:
            stats.columns[name] = found
    return stats.to_json()


def _footer_column(metadata: pq.FileMetaData, index: int, dtype: pa.DataType) -> _Column | None:
    column = _Column(bounded=_has_bounds(dtype))
    for group in range(metadata.num_row_groups):
        found = metadata.row_group(group).column(index).statistics
        if found is None or not found.has_null_count:
            return None
        column.nulls += found.null_count
        if not column.bounded:
            continue
        if not found.has_min_max:
            # A group of nulls only has no bounds; a group of values without them is unknown.
            column.bounded = found.null_count == metadata.row_group(group).num_rows
            continue
        low, high = found.min, found.max
        if isinstance(low, float) and (math.isnan(low) or math.isnan(high)):
            column.bounded = False
            continue
        column.low = low if column.low is None else min(column.low, low)
        column.high = high if column.high is None else max(column.high, high)
    return column


def _json_bounds(low: Any, high: Any) -> tuple[Any, Any]:
    if isinstance(low, str):
        # A prefix is a valid lower bound; a truncated upper bound would lie, so leave it out.
        return low[:STRING_PREFIX], (high if len(high) <= STRING_PREFIX else None)
    if isinstance(low, dt.datetime):
        return _timestamp(low, up=False), _timestamp(high, up=True)
    if isinstance(low, dt.date):
        return low.isoformat(), high.isoformat()
    if isinstance(low, float) and (math.isinf(low) or math.isinf(high)):
        return None, None
    return low, high


def _timestamp(value: dt.datetime, *, up: bool) -> str:
    """Delta stores timestamp bounds with millisecond precision: round outward."""
    micros = value.microsecond % 1000
    value = value - dt.timedelta(microseconds=micros)
    if up and micros:
        value += dt.timedelta(milliseconds=1)
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="milliseconds") + "Z"
    return value.isoformat(timespec="milliseconds")
