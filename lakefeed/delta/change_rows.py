"""The change data feed of a table whose files carry deletion vectors, from its log, Spark-free
(delta-rs's ``load_cdf`` reads such files as plain Parquet).

Per commit, Delta's rule (PROTOCOL.md "Change Data Files"): a commit with ``cdc`` actions
changed exactly the rows of those files (their ``_change_type`` column says how); otherwise its
data-changing ``add`` actions are ``insert`` rows and its ``remove`` actions ``delete`` rows,
each without the rows its own deletion vector deletes. A path both removed and added in one
commit without change files is one logical file whose deletion vector changed: its rows in
the new vector and not in the old one are ``delete`` rows (a DELETE by a writer that records
no change files), rows the other way round ``insert`` rows; the file's other rows did not
change. Rows come out as the table's columns plus ``_change_type``, ``_commit_version`` and
``_commit_timestamp``, commit after commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable
from pyroaring import BitMap64

from lakefeed.delta import dv, files, log
from lakefeed.delta.errors import ChangeFeedError
from lakefeed.delta.mapping import ColumnMapping
from lakefeed.delta.schema import table_arrow_schema

ENABLE = "delta.enableChangeDataFeed"
CHANGE_TYPE = "_change_type"


def rows(
    table: DeltaTable, root: str, first: int, last: int, columns: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The change rows of versions ``first..last`` of ``table`` (at ``root``) as batches of the
    table's columns plus ``columns`` (Delta's change columns); a version written while the
    feed was off is refused."""
    schema = table_arrow_schema(table.schema())
    mapping = log.table_mapping(table)
    on = _feed_on(log.rs_table(root, first).metadata().configuration)
    for version in range(first, last + 1):
        actions = log.commit_actions(root, version)
        if actions is None:
            raise ChangeFeedError(f"version {version} of {root} is missing from its log")
        on = _turned(actions, on)
        changes = list(_commit_rows(root, actions, schema, mapping))
        if changes and not on:
            raise ChangeFeedError(
                f"the change data feed of {root} was off at version {version}",
                fix=f"start after the version that set {ENABLE}=true",
            )
        stamp = _timestamp(actions)
        for kind, part in changes:
            yield from _stamped(part, kind, version, stamp, columns).to_batches()


def _feed_on(configuration: dict[str, Any]) -> bool:
    return str(configuration.get(ENABLE, "")).lower() == "true"


def _turned(actions: list[dict[str, Any]], on: bool) -> bool:
    """Whether the feed is on after the commit's ``metaData`` (as before without one)."""
    for action in actions:
        if "metaData" in action:
            on = _feed_on(action["metaData"].get("configuration") or {})
    return on


def _timestamp(actions: list[dict[str, Any]]) -> int:
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    return log.commit_time({"timestamp": info.get("timestamp", 0), **info})


def _commit_rows(
    root: str, actions: list[dict[str, Any]], schema: pa.Schema, mapping: ColumnMapping
) -> Iterator[tuple[str | None, pa.Table]]:
    """The commit's changed rows by kind (None: the rows carry ``_change_type`` themselves)."""
    cdc = [a["cdc"] for a in actions if "cdc" in a]
    if cdc:
        for change in cdc:
            yield None, _read_changes(root, change, schema, mapping)
        return
    adds = {a["add"]["path"]: a["add"] for a in actions if "add" in a and _changes(a["add"])}
    removes = {
        a["remove"]["path"]: a["remove"] for a in actions if "remove" in a and _changes(a["remove"])
    }
    for path, remove in removes.items():
        if path in adds:
            yield from _vector_change(root, remove, adds[path], schema, mapping)
        else:
            yield "delete", _read(root, remove, schema, mapping, remove.get("deletionVector"))
    for path, add in adds.items():
        if path not in removes:
            yield "insert", _read(root, add, schema, mapping, add.get("deletionVector"))


def _changes(action: dict[str, Any]) -> bool:
    return bool(action.get("dataChange", True))


def _vector_change(
    root: str,
    remove: dict[str, Any],
    add: dict[str, Any],
    schema: pa.Schema,
    mapping: ColumnMapping,
) -> Iterator[tuple[str, pa.Table]]:
    """One logical file whose deletion vector changed: the rows it now deletes and did not,
    as ``delete``; the rows it deleted and no longer does, as ``insert``."""
    before, after = _deleted(root, remove), _deleted(root, add)
    gone, back = after - before, before - after
    if not gone and not back:
        return
    everything = _read(root, add, schema, mapping, None)
    for kind, positions in (("delete", gone), ("insert", back)):
        if positions:
            at = np.fromiter(positions, dtype=np.int64, count=len(positions))
            yield kind, everything.take(pa.array(at))


def _deleted(root: str, action: dict[str, Any]) -> BitMap64:
    descriptor = dv.Descriptor.from_json(action.get("deletionVector"))
    return BitMap64() if descriptor is None else dv.deleted_rows(root, descriptor)


def _read(
    root: str,
    action: dict[str, Any],
    schema: pa.Schema,
    mapping: ColumnMapping,
    vector: dict[str, Any] | None,
) -> pa.Table:
    """The rows of the file an ``add``, ``remove`` or ``cdc`` action names, without those
    ``vector`` deletes (columns and partition values by physical name under column mapping)."""
    data = log.DataFile(
        action["path"],
        int(action.get("size") or 0),
        mapping.logical_partition_values(dict(action.get("partitionValues") or {})),
        0,
        dv.Descriptor.from_json(vector),
    )
    return pa.Table.from_batches(list(files.read_file(root, data, schema, mapping)), schema)


def _read_changes(
    root: str, action: dict[str, Any], schema: pa.Schema, mapping: ColumnMapping
) -> pa.Table:
    """A change file's rows and its ``_change_type`` column (never renamed by the mapping)."""
    rows = _read(root, action, schema, mapping, None)
    kinds = _read(root, action, pa.schema([pa.field(CHANGE_TYPE, pa.string())]), _PLAIN, None)
    return rows.append_column(kinds.field(0), kinds.column(0))


_PLAIN = ColumnMapping("none", ())


def _stamped(
    part: pa.Table, kind: str | None, version: int, stamp: int, columns: pa.Schema
) -> pa.Table:
    count = part.num_rows
    if kind is not None:
        part = part.append_column(CHANGE_TYPE, pa.array([kind] * count, pa.string()))
    extra = {
        "_commit_version": pa.array([version] * count, pa.int64()),
        "_commit_timestamp": pa.array([stamp * 1000] * count, pa.timestamp("us", tz="UTC")),
    }
    for field in columns:
        if field.name in extra:
            part = part.append_column(field, extra[field.name].cast(field.type))
    return part
