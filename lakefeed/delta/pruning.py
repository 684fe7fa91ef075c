"""File skipping for batch reads, Spark-free: partition values and min/max/null statistics
decide which files cannot hold a row matching the pushed filters.

A predicate is (op, column, value) with op one of = <=> < <= > >= in isnull isnotnull.
Anything we cannot decide (unknown op, missing or suspicious statistics, values of different
types) keeps the file: skipping must never drop a matching row.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from lakefeed.delta import dv, log
from lakefeed.delta.files import local_path, partition_string
from lakefeed.delta.log import DataFile
from lakefeed.delta.stats import STRING_PREFIX

Predicate = tuple[str, str, Any]
_SUPPORTED = {"=", "<=>", "<", "<=", ">", ">=", "in", "isnull", "isnotnull"}


def supported(op: str) -> bool:
    return op in _SUPPORTED


def _norm(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value


def _cmp(op: str, low: Any, high: Any, value: Any) -> bool:
    """Can some x in [low, high] satisfy ``x op value``? (True when unsure.)"""
    try:
        if op in ("=", "<=>"):
            return (low is None or low <= value) and (high is None or value <= high)
        if op == "<":
            return low is None or low < value
        if op == "<=":
            return low is None or low <= value
        if op == ">":
            return high is None or high > value
        if op == ">=":
            return high is None or high >= value
    except TypeError:
        return True
    return True


def _partition_match(op: str, actual: Any, value: Any) -> bool:
    if op == "isnull":
        return actual is None
    if op == "isnotnull":
        return actual is not None
    if op == "in":
        return actual in value
    if op == "<=>":
        return actual == value
    if actual is None or value is None:
        return False
    return _cmp(op, actual, actual, value)


def _stats_match(op: str, row: dict, column: str, value: Any) -> bool:
    rows = row.get("num_records")
    nulls = row.get(f"null_count.{column}")
    if op == "isnull":
        return nulls is None or nulls > 0
    if op == "isnotnull":
        return nulls is None or rows is None or nulls < rows
    if rows is not None and nulls is not None and nulls == rows and rows > 0:
        return op == "<=>" and value is None  # all null: no comparison can hold
    low, high = _norm(row.get(f"min.{column}")), _norm(row.get(f"max.{column}"))
    if isinstance(high, str) and len(high) >= STRING_PREFIX:
        high = None  # possibly truncated by the writer
    if isinstance(high, dt.datetime):
        high += dt.timedelta(milliseconds=1)  # writers truncate to milliseconds
    if isinstance(low, float) and math.isnan(low) or isinstance(high, float) and math.isnan(high):
        return True
    if op == "in":
        return any(_cmp("=", low, high, _norm(v)) for v in value if v is not None)
    if value is None:
        return True
    return _cmp(op, low, high, _norm(value))


def table_files(
    table: DeltaTable, root: str, predicates: Sequence[Predicate] = ()
) -> list[DataFile]:
    """The files of a snapshot that may hold rows matching ``predicates``, each with its
    deletion vector (statistics are keyed by physical name under column mapping)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    physical = log.table_mapping(table).physical_names()
    files = select_files(actions, predicates, physical)
    deletes = log.file_deletes(table, root)
    if not deletes:
        return files
    return [
        dataclasses.replace(f, deletes=deletes.get(dv.file_key(local_path(root, f.path))))
        for f in files
    ]


def snapshot_files(table: DeltaTable, root: str) -> list[DataFile]:
    """The files of a snapshot in Delta's streaming order (modification time, then path)."""
    return sorted(table_files(table, root), key=lambda f: (f.modification_time, f.path))


def select_files(
    actions: pa.Table,
    predicates: Sequence[Predicate],
    physical: dict[str, str] | None = None,
) -> list[DataFile]:
    """The files of ``actions`` (delta-rs ``get_add_actions(flatten=True)``) that may match;
    ``physical``: the column names statistics use (column mapping), by logical name."""
    partition_columns = [
        c[len("partition.") :] for c in actions.column_names if c.startswith("partition.")
    ]
    if physical:  # delta-rs names partition values by logical name, statistics by physical
        predicates = [
            (op, c if c in partition_columns else physical.get(c, c), v) for op, c, v in predicates
        ]
    selected = []
    for row in actions.to_pylist():
        if all(_keep(row, p, partition_columns) for p in predicates):
            values = {c: partition_string(row[f"partition.{c}"]) for c in partition_columns}
            selected.append(
                DataFile(
                    row["path"], int(row["size_bytes"]), values, int(row["modification_time"] or 0)
                )
            )
    return selected


def _keep(row: dict, predicate: Predicate, partition_columns: list[str]) -> bool:
    op, column, value = predicate
    if op not in _SUPPORTED:
        return True
    if column in partition_columns:
        actual = _norm(row[f"partition.{column}"])
        norm_value = tuple(_norm(v) for v in value) if op == "in" else _norm(value)
        try:
            return _partition_match(op, actual, norm_value)
        except TypeError:
            return True
    return _stats_match(op, row, column, value)
