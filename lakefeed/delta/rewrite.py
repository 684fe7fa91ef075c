"""OPTIMIZE's file rewrites that lakefeed commits itself (:func:`.log_writer.commit_actions`),
where delta-rs's OPTIMIZE does not reach; Spark-free.

- **Purge** (:func:`purge`, after delta-rs's compaction of a table with deletion vectors): a
  file whose deletion vector deletes more than :data:`MAX_DELETED_ROWS_RATIO` of its rows is
  rewritten without them, even alone in its partition (delta-spark's rule).
- **Compaction lakefeed commits itself** (:func:`compact`, where :func:`own` says so): delta-rs
  1.6.6 refuses OPTIMIZE on column-mapped tables and on tables with the writer features only
  lakefeed's own commits honour (:data:`.features.OWN_COMMIT`). In each partition the files
  smaller than the target size (``delta.targetFileSize``, else delta-rs's 100 MiB) are packed,
  largest first, into bins of at most that size (delta-rs's rule); a bin of two files or more
  is rewritten as one file, and so is a file the purge takes. A rewritten file loses its
  deletion vector (its deleted rows are left out): the compaction purges the vectors of the
  files it rewrites. The commit keeps the table's domains (it writes none), gets an in-commit
  timestamp where they are on and fresh row ids where the table tracks rows without
  ``delta.enableRowTracking`` (with it on, rewritten rows would have to keep their ids and
  commit versions in materialized columns, which this rewrite does not write: refused).
- **Clustering** (a liquid-clustered table): a file no OPTIMIZE has clustered yet is rewritten
  even alone, each rewritten file's rows are ordered along a Z-order curve over the clustering
  columns (:mod:`.zorder`, per file, not across the table as delta-spark's Hilbert clustering)
  and its ``add`` says ``clusteringProvider: "liquid"`` (PROTOCOL.md "Clustered Table").

Files are read by physical name or field id with their deletion vectors applied and written
with physical names and field ids (:func:`.dv_write.write_rows`). One commit removes them and
adds the new files, all with ``dataChange=false`` (streams skip it), under snapshot isolation
as delta-spark's OPTIMIZE. On object storage, or a log the replay here does not know, nothing
is rewritten (:func:`compact` answers None).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from lakefeed.core import storage
from lakefeed.core.errors import DeltaError
from lakefeed.delta import (
    clustering,
    dv_write,
    features,
    files,
    log,
    log_writer,
    row_tracking,
    zorder,
)
from lakefeed.delta.errors import FEATURE_UNSUPPORTED
from lakefeed.delta.mapping import ColumnMapping
from lakefeed.delta.schema import table_arrow_schema

MAX_DELETED_ROWS_RATIO = 0.05
"""delta-spark's ``spark.databricks.delta.optimize.maxDeletedRowsRatio``: OPTIMIZE rewrites a
file whose deletion vector deletes more of its rows than this, even alone in its partition."""
TARGET_FILE_SIZE = "delta.targetFileSize"
DEFAULT_TARGET_SIZE = 100 * 1024 * 1024
"""delta-rs's OPTIMIZE target when the table sets no ``delta.targetFileSize``."""
_PURGE = {"predicate": "[]", "deletionVectors": "purge"}
_COMPACT = {"predicate": "[]", "zOrderBy": "[]", "auto": "false"}
PROVIDER = "liquid"
"""The ``clusteringProvider`` of the files OPTIMIZE clusters (PROTOCOL.md "Clustered Table")."""

Filters = list[tuple[str, str, Any]] | None
"""delta-rs's partition filters: (column, ``=``/``!=``/``in``/``not in``, value(s))."""


def purge(
    table: DeltaTable, root: str, partition_filters: Filters, txn: dv_write.Marks | None
) -> int:
    """Rewrite the files (in the partitions ``partition_filters`` select) whose deletion vector
    deletes more than :data:`MAX_DELETED_ROWS_RATIO` of their rows, without those rows, one
    rewritten file per partition; how many files it rewrote."""
    version = table.version()
    live = _live(table, root)
    if live is None:
        return 0
    columns = log.table_mapping(table)
    chosen = [a for a in live if _selected(a, columns, partition_filters) and _purgeable(a)]
    bins = list(_by_partition(chosen).values())
    if bins:
        _rewrite(table, root, version, bins, _PURGE, txn)
    return len(chosen)


def own(table: DeltaTable) -> bool:
    """Whether OPTIMIZE of ``table`` is lakefeed's own (:func:`compact`): delta-rs refuses it."""
    return log.table_mapping(table).active or features.needs_own_commit(table)


def compact(
    table: DeltaTable,
    root: str,
    partition_filters: Filters,
    txn: dv_write.Marks | None,
    target_size: int | None = None,
) -> dict[str, Any] | None:
    """Compact (and cluster) the small files of a table :func:`own` names (the module doc) in
    the partitions ``partition_filters`` select, into files of up to ``target_size`` bytes
    (auto compaction's own; else the table's); delta-rs's OPTIMIZE metric names, or None where
    this cannot rewrite files (nothing written)."""
    version = table.version()
    live = _live(table, root)
    if live is None:
        return None
    _refuse_stable_row_ids(table, root)
    columns = log.table_mapping(table)
    selected = [a for a in live if _selected(a, columns, partition_filters)]
    configured = table.metadata().configuration.get(TARGET_FILE_SIZE)
    target = target_size or int(configured or DEFAULT_TARGET_SIZE)
    cluster_by = clustering.columns_of(root, table)
    groups = _by_partition(selected)
    bins = [b for group in groups.values() for b in _bins(group, target)]
    chosen = [b for b in bins if _rewrites(b, bool(cluster_by))]
    parameters = {**_COMPACT, "clusterBy": json.dumps(cluster_by)} if cluster_by else _COMPACT
    added = _rewrite(table, root, version, chosen, parameters, txn, cluster_by) if chosen else 0
    removed = sum(len(b) for b in chosen)
    return {
        "numFilesAdded": added,
        "numFilesRemoved": removed,
        "partitionsOptimized": len({_partition(b[0]) for b in chosen}),
        "totalConsideredFiles": len(selected),
        "totalFilesSkipped": len(selected) - removed,
        "numDeletionVectorsPurged": sum(1 for b in chosen for a in b if a.get("deletionVector")),
    }


def _live(table: DeltaTable, root: str) -> list[dict[str, Any]] | None:
    if storage.is_object_store(root):
        return None
    live = dv_write.planned_files(table, root)
    return None if live is None else list(live.values())


def _selected(add: dict[str, Any], columns: ColumnMapping, partition_filters: Filters) -> bool:
    """Whether the file's partition (its values by logical name) passes the filters (``""``
    names the null partition, as in delta-rs's filters)."""
    values = columns.logical_partition_values(add.get("partitionValues") or {})
    for column, op, value in partition_filters or []:
        wanted = {str(v) for v in value} if op in ("in", "not in") else {str(value)}
        if ((values.get(column) or "") in wanted) != (op in ("=", "in")):
            return False
    return True


def _refuse_stable_row_ids(table: DeltaTable, root: str) -> None:
    """Refuse OPTIMIZE where row tracking is on (PROTOCOL.md "Row Tracking": rows keep their
    ids and commit versions when rewritten; delta-spark's OPTIMIZE writes both into the
    materialized columns, which this rewrite does not)."""
    if features.tracks_rows(table) and row_tracking.is_on(table.metadata().configuration):
        raise DeltaError(
            f"OPTIMIZE on the Delta table {root} is refused: it has row tracking on "
            f"({row_tracking.ENABLE}=true), and the rows OPTIMIZE rewrites must keep their row ids "
            "and commit versions, which lakefeed's OPTIMIZE does not materialize; nothing was "
            "written",
            fix="run OPTIMIZE with delta-spark; appends, DELETE and RESTORE work here",
            code=FEATURE_UNSUPPORTED,
        )


def _rewrites(group: list[dict[str, Any]], clustered: bool) -> bool:
    """Whether compaction rewrites a bin: two files or more, a file to purge, or in a clustered
    table a file no OPTIMIZE has clustered."""
    if len(group) > 1 or any(_purgeable(a) for a in group):
        return True
    return clustered and any(a.get("clusteringProvider") != PROVIDER for a in group)


def _purgeable(add: dict[str, Any]) -> bool:
    descriptor = add.get("deletionVector")
    records = json.loads(add.get("stats") or "{}").get("numRecords")
    if not descriptor or not records:
        return False
    return int(descriptor["cardinality"]) > MAX_DELETED_ROWS_RATIO * int(records)


def _partition(add: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((add.get("partitionValues") or {}).items()))


def _by_partition(adds: list[dict[str, Any]]) -> dict[tuple[tuple[str, Any], ...], list[dict]]:
    grouped: dict[tuple[tuple[str, Any], ...], list[dict[str, Any]]] = {}
    for add in adds:
        grouped.setdefault(_partition(add), []).append(add)
    return grouped


def _bins(adds: list[dict[str, Any]], target: int) -> Iterator[list[dict[str, Any]]]:
    """One partition's files in bins: each file of the target size or more alone, the smaller
    ones packed largest first into bins of at most ``target`` bytes."""
    current: list[dict[str, Any]] = []
    size = 0
    for add in sorted(adds, key=lambda a: -int(a["size"])):
        if int(add["size"]) >= target:
            yield [add]
            continue
        if current and size + int(add["size"]) > target:
            yield current
            current, size = [], 0
        current.append(add)
        size += int(add["size"])
    if current:
        yield current


def _rewrite(
    table: DeltaTable,
    root: str,
    version: int,
    bins: list[list[dict[str, Any]]],
    parameters: dict[str, str],
    txn: dv_write.Marks | None,
    cluster_by: list[str] | None = None,
) -> int:
    """Rewrite each bin's live rows as new files (in Z-order of ``cluster_by``, clustered) and
    commit them in place of the bin's files (nothing of it stays when the commit fails); how
    many files it added."""
    schema = table_arrow_schema(table.schema())
    columns = log.table_mapping(table)
    written: list[files.WrittenFile] = []
    chosen = [add for group in bins for add in group]
    clustered = {"clusteringProvider": PROVIDER} if cluster_by else {}
    try:
        for group in bins:
            rows = _kept_rows(root, group, schema, columns)
            if cluster_by:
                whole = zorder.ordered(pa.Table.from_batches(list(rows), schema), cluster_by)
                rows = iter(whole.to_batches())
            written += dv_write.write_rows(root, table, rows)
        now = files.now_ms()
        actions = [_info(now, parameters, chosen, written)]
        if txn is not None:
            actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
        actions += [
            {"remove": {**dv_write.remove_action(add, now), "dataChange": False}} for add in chosen
        ]
        actions += [{"add": {**dv_write.new_add(f), **clustered}} for f in written]
        touched = {a["path"] for a in chosen}
        row_ids = features.tracks_rows(table)
        log_writer.commit_actions(root, version, actions, touched, None, row_ids=row_ids)
    except BaseException:
        files.remove_files(root, written)
        raise
    table.update_incremental()
    return len(written)


def _kept_rows(
    root: str, adds: list[dict[str, Any]], schema: pa.Schema, columns: ColumnMapping
) -> Iterator[pa.RecordBatch]:
    """The live rows of the files of ``adds`` (their deletion vectors applied), by logical name."""
    for add in adds:
        yield from files.read_file(root, dv_write.data_file(add, columns, True), schema, columns)


def _info(
    now: int,
    parameters: dict[str, str],
    removed: list[dict[str, Any]],
    added: list[files.WrittenFile],
) -> dict[str, Any]:
    """OPTIMIZE's ``commitInfo`` (snapshot isolation: compaction changes no rows)."""
    metrics = {
        "numRemovedFiles": len(removed),
        "numAddedFiles": len(added),
        "numRemovedBytes": sum(int(a["size"]) for a in removed),
        "numAddedBytes": sum(f.size for f in added),
        "numDeletionVectorsRemoved": sum(1 for a in removed if a.get("deletionVector")),
    }
    return log_writer.commit_info(
        "OPTIMIZE", parameters, metrics=metrics, timestamp=now, isolationLevel="SnapshotIsolation"
    )
