"""DELETE and UPDATE with deletion vectors (merge-on-read), as delta-spark does on a table
with ``delta.enableDeletionVectors=true``: the matching rows are marked in a deletion vector,
the data files stay (an UPDATE writes the rows' new versions into new files). OPTIMIZE's purge
and VACUUM's cleanup of vector files are here too. Spark-free.

Per file the matching rows' positions (:mod:`.predicates`) join the file's existing deletion
vector (a union: a row deleted before stays deleted); all new vectors of one change go into
one ``deletion_vector_<uuid>.bin`` beside the data (PROTOCOL.md "Deletion Vector Format": a
version byte, then per vector its size, its ``RoaringBitmapArray`` and its CRC-32; storage type
``u``, the UUID in Z85, no prefix). The commit removes each touched logical file with its old
descriptor and adds it back with the new one and its ``numRecords``; a file left with no row
is removed outright. delta-rs cannot commit a ``deletionVector``: :mod:`.log_writer` does.

Where this does not apply, :func:`delete` / :func:`update` answer None and delta-rs rewrites
the files instead (same rows, copy-on-write): deletion vectors not enabled, no predicate, a
predicate or value :mod:`.predicates` cannot evaluate, column mapping, object storage (its
exclusive create is a check then a PUT, not atomic), or a log the replay does not know.
"""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyroaring import BitMap64

from lakefeed.core import storage
from lakefeed.delta import constraints, dv, files, log, log_writer, predicates, pruning, replay
from lakefeed.delta.schema import table_arrow_schema

ENABLE = "delta.enableDeletionVectors"
FORMAT_VERSION = b"\x01"
"""The first byte of a deletion vector file."""


@dataclass(frozen=True)
class Marked:
    """A live file of the table and the rows it deletes once the DELETE commits."""

    add: dict[str, Any]  # the file's add action as the log holds it
    rows: BitMap64  # every deleted row: its old vector's and the new ones
    records: int  # rows in the data file
    changed: pa.Table  # the rows this change deletes, as they were (UPDATE writes them anew)

    @property
    def newly(self) -> int:
        return self.changed.num_rows


def enabled(table: DeltaTable) -> bool:
    """Whether writers may add deletion vectors to ``table`` (PROTOCOL.md: the feature is
    supported and ``delta.enableDeletionVectors`` is ``true``)."""
    protocol = table.protocol()
    if "deletionVectors" not in (protocol.writer_features or []):
        return False
    return str(table.metadata().configuration.get(ENABLE, "")).lower() == "true"


def delete(
    table: DeltaTable, root: str, predicate: str | None, txn: tuple[str, int, str | None] | None
) -> dict[str, Any] | None:
    """DELETE the rows matching ``predicate`` with deletion vectors, one commit (with
    ``txn``: app id, version, source offsets); its metrics, or None where it does not apply
    (the module doc): then nothing was written."""
    return _change(table, root, "DELETE", predicate, None, txn)


def update(
    table: DeltaTable,
    root: str,
    updates: Mapping[str, str],
    predicate: str | None,
    txn: tuple[str, int, str | None] | None,
) -> dict[str, Any] | None:
    """UPDATE as delta-spark does with deletion vectors: the matching rows are marked deleted
    and their new versions (``updates``: column -> SQL) go into new files, one commit; its
    metrics, or None where it does not apply (also: a table with CHECK constraints,
    invariants or NOT NULL columns, which delta-rs's UPDATE checks)."""
    if _guarded(table):
        return None
    return _change(table, root, "UPDATE", predicate, dict(updates), txn)


def _change(
    table: DeltaTable,
    root: str,
    operation: str,
    predicate: str | None,
    updates: dict[str, str] | None,
    txn: tuple[str, int, str | None] | None,
) -> dict[str, Any] | None:
    if not predicate or not _applies(table, root):
        return None
    version = table.version()
    live = log_writer.live_files(root, version)
    if live is None or not log_writer.same_files(table, live):
        return None
    schema = table_arrow_schema(table.schema())
    try:
        marked = _marked(table, root, predicates.parse(predicate), live)
        rewritten = [_updated(m.changed, updates, schema) for m in marked] if updates else []
    except predicates.Untranslatable:
        return None
    partitions = list(table.metadata().partition_columns)
    batches = (batch for rows in rewritten for batch in rows.to_batches())
    written = files.write_batches(root, batches, partitions, "", schema) if rewritten else []
    metrics = _metrics(operation, marked, written)
    if marked:
        try:
            _commit(root, version, operation, predicate, marked, written, txn, metrics)
        except BaseException:
            files.remove_files(root, written)
            raise
        table.update_incremental()
    return metrics


def _guarded(table: DeltaTable) -> bool:
    """Whether the table checks rows as they are written (left to delta-rs's UPDATE)."""
    schema = table.schema()
    checks = constraints.of_table(table.metadata().configuration, schema)
    return bool(checks) or not all(field.nullable for field in schema.fields)


def _updated(rows: pa.Table, updates: dict[str, str], schema: pa.Schema) -> pa.Table:
    """``rows`` with the columns ``updates`` names set to their SQL values, cast to the
    column's type (a value that does not cast is :class:`predicates.Untranslatable`)."""
    for column, text in updates.items():
        if column not in schema.names:
            raise predicates.Untranslatable(f"no column {column!r}")
        value = predicates.evaluate(predicates.parse(text), rows)
        dtype = schema.field(column).type
        try:
            values = pa.repeat(value, rows.num_rows) if isinstance(value, pa.Scalar) else value
            values = pc.cast(values, dtype)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            raise predicates.Untranslatable(str(error)) from None
        rows = rows.set_column(schema.get_field_index(column), column, values)
    return rows


def _applies(table: DeltaTable, root: str) -> bool:
    if storage.is_object_store(root) or not enabled(table):
        return False
    return not log.table_mapping(table).active


def _marked(
    table: DeltaTable, root: str, tree: Any, live: dict[str, dict[str, Any]]
) -> list[Marked]:
    """The files the change touches, with their new deleted rows; files whose partition
    values or statistics rule the predicate out are not read."""
    schema = table_arrow_schema(table.schema())
    actions = pa.table(table.get_add_actions(flatten=True))
    physical = log.table_mapping(table).physical_names()
    maybe = {f.path for f in pruning.select_files(actions, predicates.conjuncts(tree), physical)}
    marked = []
    for path, add in live.items():
        if path not in maybe:
            continue
        data = log.DataFile(path, int(add["size"]), dict(add.get("partitionValues") or {}))
        rows = pa.Table.from_batches(list(files.read_file(root, data, schema)), schema)
        hits = np.flatnonzero(predicates.matches(tree, rows).to_numpy(zero_copy_only=False))
        descriptor = dv.Descriptor.from_json(add.get("deletionVector"))
        old = BitMap64() if descriptor is None else dv.deleted_rows(root, descriptor)
        new = BitMap64(hits.astype(np.uint64)) - old
        if new:
            taken = rows.take(pa.array(np.fromiter(new, dtype=np.int64, count=len(new))))
            marked.append(Marked(add, old | new, rows.num_rows, taken))
    return marked


def _metrics(
    operation: str, marked: list[Marked], written: list[files.WrittenFile]
) -> dict[str, Any]:
    emptied = sum(1 for m in marked if len(m.rows) >= m.records)
    changed = "num_deleted_rows" if operation == "DELETE" else "num_updated_rows"
    return {
        "num_added_files": len(written),
        "num_removed_files": emptied,
        changed: sum(m.newly for m in marked),
        "num_copied_rows": 0,
        "num_deletion_vectors_added": len(marked) - emptied,
    }


def _commit(
    root: str,
    version: int,
    operation: str,
    predicate: str,
    marked: list[Marked],
    written: list[files.WrittenFile],
    txn: tuple[str, int, str | None] | None,
    metrics: dict[str, Any],
) -> int:
    """Write the deletion vectors and commit them with the ``written`` files; the DV file
    goes when the commit fails."""
    now = files.now_ms()
    kept = [m for m in marked if len(m.rows) < m.records]
    location, descriptors = _write_vectors(root, kept)
    info = _commit_info(now, version, operation, predicate, txn, metrics)
    actions: list[dict[str, Any]] = [info]
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    for mark in marked:
        actions.append({"remove": _remove(mark.add, now)})
    for mark, descriptor in zip(kept, descriptors, strict=True):
        actions.append({"add": _re_add(mark, descriptor)})
    actions += [{"add": {**_new_add(f), "dataChange": True}} for f in written]
    touched = {m.add["path"] for m in marked}
    try:
        return log_writer.commit_actions(root, version, actions, touched, txn[0] if txn else None)
    except BaseException:
        if location is not None:
            storage.remove(location)
        raise


def _write_vectors(root: str, kept: list[Marked]) -> tuple[str | None, list[dict[str, Any]]]:
    """One deletion vector file holding the vectors of ``kept``; its location and their
    descriptors (in order)."""
    if not kept:
        return None, []
    name = uuid.uuid4()
    blob, descriptors = bytearray(FORMAT_VERSION), []
    for mark in kept:
        data = dv.serialize(mark.rows)
        descriptors.append(
            {
                "storageType": "u",
                "pathOrInlineDv": dv.z85_encode(name.bytes),
                "offset": len(blob),
                "sizeInBytes": len(data),
                "cardinality": len(mark.rows),
            }
        )
        blob += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    location = storage.join(root, f"deletion_vector_{name}.bin")
    storage.write_bytes(location, bytes(blob))
    return location, descriptors


def _commit_info(
    now: int,
    version: int,
    operation: str,
    predicate: str,
    txn: tuple[str, int, str | None] | None,
    metrics: dict[str, Any],
) -> dict[str, Any]:
    offsets = {replay.OFFSETS: txn[2]} if txn is not None and txn[2] else {}
    changed = "num_deleted_rows" if operation == "DELETE" else "num_updated_rows"
    return {
        "commitInfo": {
            "timestamp": now,
            "operation": operation,
            "operationParameters": {"predicate": json.dumps([predicate])},
            "readVersion": version,
            "isolationLevel": "WriteSerializable",
            "isBlindAppend": False,
            "operationMetrics": {
                "numDeletedRows" if operation == "DELETE" else "numUpdatedRows": str(
                    metrics[changed]
                ),
                "numRemovedFiles": str(metrics["num_removed_files"]),
                "numDeletionVectorsAdded": str(metrics["num_deletion_vectors_added"]),
                "numAddedFiles": str(metrics["num_added_files"]),
                "numCopiedRows": "0",
            },
            "engineInfo": "lakefeed",
            "engineInfo_lakefeed": "lakefeed",
            **offsets,
        }
    }


def _remove(add: dict[str, Any], now: int) -> dict[str, Any]:
    """The ``remove`` of a logical file: its path and its deletion vector (PROTOCOL.md)."""
    remove = {
        "path": add["path"],
        "deletionTimestamp": now,
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": add.get("partitionValues") or {},
        "size": add["size"],
    }
    for key in ("deletionVector", "tags", "baseRowId", "defaultRowCommitVersion"):
        if add.get(key) is not None:
            remove[key] = add[key]
    return remove


def _re_add(mark: Marked, descriptor: dict[str, Any]) -> dict[str, Any]:
    """The file added back with its new deletion vector; its statistics keep ``numRecords``
    (the data file's rows, as the protocol requires) and are no longer tight bounds."""
    stats = json.loads(mark.add.get("stats") or "{}")
    stats["numRecords"] = mark.records
    stats["tightBounds"] = False
    add = {key: value for key, value in mark.add.items() if value is not None}
    return {
        **add,
        "dataChange": True,
        "stats": json.dumps(stats),
        "deletionVector": descriptor,
    }


# -- purging them (OPTIMIZE) ---------------------------------------------------------------

MAX_DELETED_ROWS_RATIO = 0.05
"""delta-spark's ``spark.databricks.delta.optimize.maxDeletedRowsRatio``: OPTIMIZE rewrites a
file whose deletion vector deletes more of its rows than this, even alone in its partition."""


def purge(
    table: DeltaTable,
    root: str,
    partition_filters: list[tuple[str, str, Any]] | None,
    txn: tuple[str, int, str | None] | None,
) -> int:
    """Rewrite the files (in the partitions ``partition_filters`` select) whose deletion vector
    deletes more than :data:`MAX_DELETED_ROWS_RATIO` of their rows, without those rows: one
    commit that changes no data (``dataChange=false``: streams skip it). How many it rewrote."""
    if storage.is_object_store(root) or log.table_mapping(table).active:
        return 0
    version = table.version()
    live = log_writer.live_files(root, version)
    if live is None or not log_writer.same_files(table, live):
        return 0
    chosen = [add for add in live.values() if _purgeable(add, partition_filters)]
    if not chosen:
        return 0
    schema = table_arrow_schema(table.schema())
    partitions = list(table.metadata().partition_columns)
    written = files.write_batches(root, _kept_rows(root, chosen, schema), partitions, "", schema)
    now = files.now_ms()
    actions: list[dict[str, Any]] = [_purge_info(now, version, len(chosen))]
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    actions += [{"remove": {**_remove(add, now), "dataChange": False}} for add in chosen]
    actions += [{"add": _new_add(f)} for f in written]
    try:
        log_writer.commit_actions(root, version, actions, {a["path"] for a in chosen}, None)
    except BaseException:
        files.remove_files(root, written)
        raise
    table.update_incremental()
    return len(chosen)


def _purgeable(add: dict[str, Any], partition_filters: list[tuple[str, str, Any]] | None) -> bool:
    descriptor = add.get("deletionVector")
    records = json.loads(add.get("stats") or "{}").get("numRecords")
    if not descriptor or not records:
        return False
    values = add.get("partitionValues") or {}
    for column, op, value in partition_filters or []:
        wanted = {str(v) for v in value} if op in ("in", "not in") else {str(value)}
        if (values.get(column) in wanted) != (op in ("=", "in")):
            return False
    return int(descriptor["cardinality"]) > MAX_DELETED_ROWS_RATIO * int(records)


def _kept_rows(
    root: str, chosen: list[dict[str, Any]], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    for add in chosen:
        deletes = dv.Descriptor.from_json(add["deletionVector"])
        data = log.DataFile(
            add["path"], int(add["size"]), dict(add.get("partitionValues") or {}), 0, deletes
        )
        yield from files.read_file(root, data, schema)


def _purge_info(now: int, version: int, count: int) -> dict[str, Any]:
    return {
        "commitInfo": {
            "timestamp": now,
            "operation": "OPTIMIZE",
            "operationParameters": {"predicate": "[]", "deletionVectors": "purge"},
            "readVersion": version,
            "isolationLevel": "SnapshotIsolation",
            "isBlindAppend": False,
            "operationMetrics": {"numDeletionVectorsRemoved": str(count)},
            "engineInfo": "lakefeed",
            "engineInfo_lakefeed": "lakefeed",
        }
    }


def _new_add(written: files.WrittenFile) -> dict[str, Any]:
    """A rewritten file's add (its path URL-encoded, as the log holds paths)."""
    return {
        "path": quote(written.path, safe="/="),
        "partitionValues": written.partition_values,
        "size": written.size,
        "modificationTime": written.modification_time,
        "dataChange": False,
        "stats": written.stats,
    }


# -- vacuum ---------------------------------------------------------------------------------


def stale_vectors(root: str, retention_ms: int, now_ms: int) -> list[str] | None:
    """Deletion vector files (``deletion_vector_<uuid>.bin`` under any prefix, relative to
    ``root``) that neither a live file nor a tombstone younger than the retention names, and
    that are older than it themselves (a DELETE still running may have written one): what
    VACUUM deletes beside the data files, as delta-spark's does. None when the log cannot be
    replayed here."""
    version = log.latest_version(root)
    replayed = None if version is None else log_writer.replay_log(root, version)
    if replayed is None:
        return None
    live, tombstones = replayed
    cutoff = now_ms - retention_ms
    kept = [add.get("deletionVector") for add in live.values()]
    kept += [
        r.get("deletionVector") for r in tombstones if int(r.get("deletionTimestamp") or 0) > cutoff
    ]
    used = {
        dv.file_key(descriptor.location(root))
        for descriptor in map(dv.Descriptor.from_json, kept)
        if descriptor is not None and descriptor.storage_type in ("u", "p")
    }
    stale = []
    for relative in storage.files_under(root):
        name = relative.rsplit("/", 1)[-1]
        if not (name.startswith("deletion_vector_") and name.endswith(".bin")):
            continue
        location = storage.join(root, relative)
        stamp = storage.stamp(location)
        old = stamp is not None and stamp[1] // 1_000_000 < cutoff
        if old and dv.file_key(location) not in used and not relative.startswith("_"):
            stale.append(relative)
    return stale
