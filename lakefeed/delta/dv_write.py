"""DELETE and UPDATE with deletion vectors (merge-on-read), as delta-spark does on a table
with ``delta.enableDeletionVectors=true``: the matching rows are marked in a deletion vector,
the data files stay (an UPDATE writes the rows' new versions into new files). MERGE
(:mod:`.dv_merge`) commits through :func:`commit_change` here too. VACUUM's cleanup of vector
files is here as well (OPTIMIZE's purge: :mod:`.rewrite`). Spark-free.

Per file the matching rows' positions (:mod:`.predicates`) join the file's existing deletion
vector (a union: a row deleted before stays deleted); all new vectors of one change go into
one ``deletion_vector_<uuid>.bin`` beside the data (PROTOCOL.md "Deletion Vector Format": a
version byte, then per vector its size, its ``RoaringBitmapArray`` and its CRC-32; storage type
``u``, the UUID in Z85, no prefix). The commit removes each touched logical file with its old
descriptor and adds it back with the new one and its ``numRecords``; a file left with no row
is removed outright. delta-rs cannot commit a ``deletionVector``: :mod:`.log_writer` does.

Under column mapping (``name`` or ``id``) files are read by physical name or field id and the
new files (change data files too) store physical names and field ids, their statistics and
partition values keyed by physical name; SQL names the logical columns. The rows a change
writes (an UPDATE's or MERGE's new versions, a MERGE's inserts) are checked before any file is
written: NOT NULL columns, CHECK constraints and invariants (:func:`.constraints.check_rows`,
Delta's error classes with the row's values).

With ``delta.enableChangeDataFeed=true`` the commit carries the change rows as delta-spark's
DML writes them: ``_change_data/[partition folders/]cdc-<uuid>.parquet`` files of the table's
data columns plus ``_change_type`` (``delete``, ``update_preimage``, ``update_postimage``,
``insert``), one ``cdc`` action each; a change feed reader then reads those rows and not the
re-added files (whose deletion vectors alone would say which rows went, not what became of
them).

Where this does not apply, :func:`delete` / :func:`update` answer None and delta-rs rewrites
the files instead (same rows, copy-on-write): deletion vectors not enabled, no predicate, a
predicate or value :mod:`.predicates` cannot evaluate, an object store without conditional PUT
(where the commit could not be created exclusively), or a log the replay does not know.
"""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyroaring import BitMap64
from sqlglot import expressions as exp

from lakefeed.core import storage
from lakefeed.delta import (
    constraints,
    dv,
    features,
    files,
    generation,
    log,
    log_writer,
    mapping,
    predicates,
    pruning,
    replay,
    row_tracking,
)
from lakefeed.delta.mapping import ColumnMapping
from lakefeed.delta.schema import table_arrow_schema

ENABLE = "delta.enableDeletionVectors"
CHANGE_FEED = "delta.enableChangeDataFeed"
CHANGE_DATA = "_change_data"
CHANGE_TYPE = "_change_type"
FORMAT_VERSION = b"\x01"
"""The first byte of a deletion vector file."""

Marks = tuple[str, int, str | None]
"""A change's ``txn``: app id, version, source offsets."""


@dataclass(frozen=True)
class Marked:
    """A live file of the table and the rows it deletes once the change commits."""

    add: dict[str, Any]  # the file's add action as the log holds it
    rows: BitMap64  # every deleted row: its old vector's and the new ones
    records: int  # rows in the data file
    changed: pa.Table  # the rows this change deletes, as they were (UPDATE writes them anew)
    positions: np.ndarray  # where each of ``changed`` is in the data file

    @property
    def newly(self) -> int:
        return self.changed.num_rows


@dataclass(frozen=True)
class Change:
    """What one change commits: the files it marks, the new files' rows and its change feed
    rows by kind (``delete``, ``update_preimage``, ...), written only where the feed is on."""

    operation: str
    parameters: dict[str, str]
    metrics: dict[str, Any]  # lakefeed's (snake_case) metrics, returned to the caller
    log_metrics: dict[str, str]  # the commitInfo's operationMetrics
    marked: list[Marked]
    new_rows: pa.Table | None
    feed: dict[str, pa.Table]
    new_ids: pa.Array | None = None
    """Where the table materializes row ids (:func:`tracked`), each new row's id: its old
    one for a row written anew, null for an inserted row (:mod:`.row_tracking`)."""
    metadata: dict[str, Any] | None = None  # a metaData action (identity high water marks)


def enabled(table: DeltaTable) -> bool:
    """Whether writers may add deletion vectors to ``table`` (PROTOCOL.md: the feature is
    supported and ``delta.enableDeletionVectors`` is ``true``)."""
    protocol = table.protocol()
    if "deletionVectors" not in (protocol.writer_features or []):
        return False
    return str(table.metadata().configuration.get(ENABLE, "")).lower() == "true"


def feed_on(table: DeltaTable) -> bool:
    """Whether the table records its row changes (``delta.enableChangeDataFeed``)."""
    return str(table.metadata().configuration.get(CHANGE_FEED, "")).lower() == "true"


def delete(
    table: DeltaTable, root: str, predicate: str | None, txn: Marks | None
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
    txn: Marks | None,
) -> dict[str, Any] | None:
    """UPDATE as delta-spark does with deletion vectors: the matching rows are marked deleted
    and their new versions (``updates``: column -> SQL) go into new files, one commit; its
    metrics, or None where it does not apply."""
    return _change(table, root, "UPDATE", predicate, dict(updates), txn)


def replace(
    table: DeltaTable,
    root: str,
    predicate: str,
    rows: pa.Table,
    parameters: dict[str, str],
    txn: Marks | None,
) -> dict[str, Any] | None:
    """An overwrite with ``replaceWhere``: the rows matching ``predicate`` are marked deleted
    and ``rows`` (the table's columns) go into new files, one ``WRITE`` commit with
    ``parameters``; its metrics, or None where it does not apply (nothing written)."""
    return _change(table, root, "WRITE", predicate, None, txn, (rows, parameters))


def _change(
    table: DeltaTable,
    root: str,
    operation: str,
    predicate: str | None,
    updates: dict[str, str] | None,
    txn: Marks | None,
    inserted: tuple[pa.Table, dict[str, str]] | None = None,
) -> dict[str, Any] | None:
    """A DELETE, an UPDATE (``updates``) or a replaceWhere write (``inserted``: its rows and
    parameters) with deletion vectors."""
    if not predicate or not applies(table, root):
        return None
    version = table.version()
    live = planned_files(table, root)
    if live is None:
        return None
    schema = table_arrow_schema(table.schema())
    gen = generation.expressions(table.schema())
    try:
        whole = bool(updates) or feed_on(table)
        marked = _marked(table, root, predicates.parse(predicate), live, whole)
        rewritten = [
            generation.regenerate(updated(m.changed, updates, schema), updates, gen, root)
            for m in marked
            if updates
        ]
    except predicates.Untranslatable:
        return None
    before = concat([m.changed for m in marked], schema)
    parameters = {"predicate": json.dumps([predicate])}
    if updates:
        after: pa.Table | None = concat(rewritten, schema)
        feed = {"update_preimage": before, "update_postimage": after}
    elif inserted is not None:
        after, parameters = inserted
        feed = {"delete": before, "insert": after}
    else:
        after, feed = None, {"delete": before}
    metrics, log_metrics = _dml_metrics(marked, updates is None)
    names = tracked(table, root)
    ids = moved_ids(root, marked, names) if names is not None and updates else None
    change = Change(operation, parameters, metrics, log_metrics, marked, after, feed, ids)
    if not marked and inserted is None:
        return {**metrics, "num_added_files": 0}
    return commit_change(table, root, version, change, txn)


def planned_files(table: DeltaTable, root: str) -> dict[str, dict[str, Any]] | None:
    """The live files' add actions at the handle's version, when the log replay here finds the
    files delta-rs's snapshot has (else the change is left to delta-rs)."""
    live = log_writer.live_files(root, table.version())
    if live is None or not log_writer.same_files(table, live):
        return None
    return live


def tracked(table: DeltaTable, root: str) -> row_tracking.Materialized | None:
    """The materialized row-tracking columns the rows a change writes anew carry (None:
    row tracking is not on)."""
    return row_tracking.materialized(
        sorted(features.writer_features(table)), table.metadata().configuration, root
    )


def moved_ids(root: str, marked: list[Marked], names: row_tracking.Materialized) -> pa.Array:
    """The row ids of the rows ``marked`` deletes, file after file (an UPDATE's order)."""
    if not marked:
        return pa.array([], pa.int64())
    which = np.concatenate([np.full(len(m.positions), i) for i, m in enumerate(marked)])
    positions = np.concatenate([m.positions for m in marked])
    adds = [m.add for m in marked]
    return row_tracking.stable_ids(root, adds, which, positions, names.row_id)


def concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """``tables`` as one table of ``schema`` (an empty one without any)."""
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _dml_metrics(marked: list[Marked], deletes: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """A DELETE's or UPDATE's metrics: lakefeed's, and its commitInfo's operationMetrics."""
    emptied = sum(1 for m in marked if len(m.rows) >= m.records)
    rows = sum(m.newly for m in marked)
    metrics = {
        "num_removed_files": emptied,
        "num_deleted_rows" if deletes else "num_updated_rows": rows,
        "num_copied_rows": 0,
        "num_deletion_vectors_added": len(marked) - emptied,
    }
    log_metrics = {
        "numDeletedRows" if deletes else "numUpdatedRows": str(rows),
        "numRemovedFiles": str(emptied),
        "numDeletionVectorsAdded": str(len(marked) - emptied),
        "numCopiedRows": "0",
    }
    return metrics, log_metrics


def updated(rows: pa.Table, updates: Mapping[str, str], schema: pa.Schema) -> pa.Table:
    """``rows`` with the columns ``updates`` names set to their SQL values, cast to the
    column's type (a value that does not cast is :class:`predicates.Untranslatable`)."""
    for column, text in updates.items():
        if column not in schema.names:
            raise predicates.Untranslatable(f"no column {column!r}")
        value = predicates.evaluate(predicates.parse(text), rows)
        field = schema.field(column)  # the table's field: its nullability kept for concat
        rows = rows.set_column(
            schema.get_field_index(column), field, cast(value, rows.num_rows, field)
        )
    return rows


def cast(value: Any, count: int, field: pa.Field) -> pa.Array | pa.ChunkedArray:
    """An evaluated SQL value (a scalar is repeated ``count`` times) as ``field``'s type."""
    try:
        values = pa.repeat(value, count) if isinstance(value, pa.Scalar) else value
        return pc.cast(values, field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise predicates.Untranslatable(str(error)) from None


def applies(table: DeltaTable, root: str) -> bool:
    """Whether a change of ``table`` may write deletion vectors here (the module doc): its
    commit must be created exclusively (on S3, a store with conditional PUT)."""
    return enabled(table) and storage.exclusive_create_refusal(root) is None


def _marked(
    table: DeltaTable, root: str, tree: Any, live: dict[str, dict[str, Any]], whole: bool
) -> list[Marked]:
    """The files the change touches, with their new deleted rows; files whose partition
    values or statistics rule the predicate out are not read, and of the others only the
    predicate's columns, unless the changed rows are needed ``whole`` (an UPDATE writes them
    anew, the change feed records them): then a file with matches is read again in full."""
    schema = table_arrow_schema(table.schema())
    columns = log.table_mapping(table)
    named = {column.name for column in tree.find_all(exp.Column)}
    narrow = pa.schema([field for field in schema if field.name in named])
    marked = []
    for add, rows, old in candidate_rows(table, root, live, predicates.conjuncts(tree), narrow):
        hits = np.flatnonzero(predicates.matches(tree, rows).to_numpy(zero_copy_only=False))
        if whole and len(hits):
            rows = file_rows(root, add, schema, columns)
        mark = mark_rows(add, rows, old, hits)
        if mark is not None:
            marked.append(mark)
    return marked


def candidate_rows(
    table: DeltaTable,
    root: str,
    live: dict[str, dict[str, Any]],
    conjuncts: list[tuple[str, str, Any]],
    schema: pa.Schema,
) -> Iterator[tuple[dict[str, Any], pa.Table, BitMap64]]:
    """Each live file that ``conjuncts`` (pruning's predicates) do not rule out: its add, all
    rows of its data file (deleted ones too: positions are row numbers) and its deleted rows."""
    actions = pa.table(table.get_add_actions(flatten=True))
    columns = log.table_mapping(table)
    maybe = {f.path for f in pruning.select_files(actions, conjuncts, columns.physical_names())}
    for path, add in live.items():
        if path not in maybe:
            continue
        descriptor = dv.Descriptor.from_json(add.get("deletionVector"))
        old = BitMap64() if descriptor is None else dv.deleted_rows(root, descriptor)
        yield add, file_rows(root, add, schema, columns), old


def data_file(add: dict[str, Any], columns: ColumnMapping, deleted: bool) -> log.DataFile:
    """The data file of ``add`` as the reader takes it: partition values by logical name, its
    deletion vector only when the ``deleted`` rows are to be left out."""
    values = columns.logical_partition_values(add.get("partitionValues") or {})
    vector = dv.Descriptor.from_json(add.get("deletionVector")) if deleted else None
    return log.DataFile(add["path"], int(add["size"]), values, 0, vector)


def file_rows(
    root: str, add: dict[str, Any], schema: pa.Schema, columns: ColumnMapping
) -> pa.Table:
    """Every row of the data file of ``add`` (deleted ones too), as ``schema``'s columns."""
    batches = files.read_file(root, data_file(add, columns, False), schema, columns)
    return pa.Table.from_batches(list(batches), schema)


def write_rows(
    root: str,
    table: DeltaTable,
    batches: Iterator[pa.RecordBatch],
    feed: bool = False,
    extra: Sequence[pa.Field] = (),
) -> list[files.WrittenFile]:
    """Write rows of the table's columns (logical names) as new data files of ``table``, or
    with ``feed`` as change data files (``_change_data/cdc-*``, paths relative to that folder;
    the rows carry ``_change_type`` last); ``extra``: columns the rows carry after the table's
    (row tracking's materialized ones), stored as named. Under column mapping with physical
    names and field ids, partitioned by the physical names, as delta-spark writes both."""
    schema = table_arrow_schema(table.schema())
    extra = [*extra, *([pa.field(CHANGE_TYPE, pa.string())] if feed else [])]
    folder, prefix = (storage.join(root, CHANGE_DATA), "cdc-") if feed else (root, "")
    columns = log.table_mapping(table)
    partitions = list(table.metadata().partition_columns)
    if not columns.active:
        return files.write_batches(
            folder, batches, partitions, prefix, pa.schema([*schema, *extra])
        )
    physical = pa.schema([*mapping.physical_schema(columns, schema), *extra])
    names = columns.physical_names()
    stored = (mapping.to_physical(batch, physical) for batch in batches)
    return files.write_batches(folder, stored, [names[p] for p in partitions], prefix, physical)


def mark_rows(
    add: dict[str, Any], rows: pa.Table, old: BitMap64, hits: np.ndarray
) -> Marked | None:
    """The file of ``add`` (all its ``rows``, ``old`` deleted already) with the rows at
    ``hits`` deleted too, or None when they were all deleted already."""
    new = BitMap64(np.asarray(hits).astype(np.uint64)) - old
    if not new:
        return None
    positions = np.fromiter(new, dtype=np.int64, count=len(new))
    return Marked(add, old | new, rows.num_rows, rows.take(pa.array(positions)), positions)


def commit_change(
    table: DeltaTable, root: str, version: int, change: Change, txn: Marks | None
) -> dict[str, Any]:
    """Write the change's new rows, its change feed files (where the feed is on) and its
    deletion vectors, and commit them on ``version``; what it wrote goes when the commit fails.
    The change's metrics with ``num_added_files``."""
    written = _write_new(root, table, change)
    feed: list[files.WrittenFile] = []
    try:
        if feed_on(table):
            feed = _write_feed(root, table, change.feed)
        _commit(root, version, change, written, feed, txn, features.tracks_rows(table))
    except BaseException:
        files.remove_files(root, written)
        files.remove_files(storage.join(root, CHANGE_DATA), feed)
        raise
    finally:
        table.update_incremental()
    return {**change.metrics, "num_added_files": len(written)}


def _write_new(root: str, table: DeltaTable, change: Change) -> list[files.WrittenFile]:
    """The change's new rows as data files, checked first (NOT NULL, CHECK constraints);
    where the table materializes row ids (:func:`tracked`), with each row's id
    (:mod:`.row_tracking`)."""
    rows = change.new_rows
    if rows is None or not rows.num_rows:
        return []
    schema = table_arrow_schema(table.schema())
    checks = constraints.of_table(table.metadata().configuration, table.schema())
    constraints.check_rows(rows, schema, checks, root)
    names = tracked(table, root)
    if names is None:
        return write_rows(root, table, iter(rows.to_batches()))
    assert change.new_ids is not None, "a change of a row-tracking table names its rows' ids"
    rows = row_tracking.with_columns(rows, change.new_ids, names)
    written = write_rows(root, table, iter(rows.to_batches()), extra=names.fields())
    return [row_tracking.without_stats(f, names) for f in written]


def _write_feed(root: str, table: DeltaTable, feed: dict[str, pa.Table]) -> list[files.WrittenFile]:
    """The change rows as ``_change_data`` files (paths relative to that folder)."""
    batches = (
        batch
        for kind, rows in feed.items()
        if rows.num_rows
        for batch in rows.append_column(
            CHANGE_TYPE, pa.array([kind] * rows.num_rows, pa.string())
        ).to_batches()
    )
    return write_rows(root, table, batches, feed=True)


def _commit(
    root: str,
    version: int,
    change: Change,
    written: list[files.WrittenFile],
    feed: list[files.WrittenFile],
    txn: Marks | None,
    row_ids: bool,
) -> int:
    """Write the deletion vectors and commit them with the ``written`` and ``feed`` files
    (``row_ids``: the table tracks rows); the DV file goes when the commit fails."""
    now = files.now_ms()
    marked = change.marked
    kept = [m for m in marked if len(m.rows) < m.records]
    location, descriptors = _write_vectors(root, kept)
    log_metrics = {**change.log_metrics, "numAddedFiles": str(len(written))}
    if feed:
        log_metrics["numAddedChangeFiles"] = str(len(feed))
    actions: list[dict[str, Any]] = [_commit_info(now, change, log_metrics, txn)]
    if change.metadata is not None:
        actions.append(change.metadata)
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    for mark in marked:
        actions.append({"remove": remove_action(mark.add, now)})
    for mark, descriptor in zip(kept, descriptors, strict=True):
        actions.append({"add": _re_add(mark, descriptor)})
    actions += [{"add": {**new_add(f), "dataChange": True}} for f in written]
    actions += [{"cdc": _cdc(f)} for f in feed]
    touched = {m.add["path"] for m in marked}
    try:
        app_id = txn[0] if txn else None
        return log_writer.commit_actions(root, version, actions, touched, app_id, row_ids=row_ids)
    except BaseException:
        if location is not None:
            storage.remove(location)
        raise


def _cdc(written: files.WrittenFile) -> dict[str, Any]:
    """The ``cdc`` action of a change data file (PROTOCOL.md "Add CDC File")."""
    return {
        "path": quote(f"{CHANGE_DATA}/{written.path}", safe="/="),
        "partitionValues": written.partition_values,
        "size": written.size,
        "dataChange": False,
    }


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
    now: int, change: Change, log_metrics: dict[str, str], txn: Marks | None
) -> dict[str, Any]:
    """The change's ``commitInfo`` (a stream batch's also records its source offsets), at the
    time its removes carry; :func:`log_writer.commit_actions` completes the shape."""
    info = log_writer.commit_info(
        change.operation, change.parameters, metrics=log_metrics, timestamp=now
    )
    if txn is not None and txn[2]:
        info["commitInfo"][replay.OFFSETS] = txn[2]
    return info


def remove_action(add: dict[str, Any], now: int) -> dict[str, Any]:
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


def new_add(written: files.WrittenFile) -> dict[str, Any]:
    """A rewritten file's add (its path URL-encoded, as the log holds paths)."""
    return {
        "path": quote(written.path, safe="/="),
        "partitionValues": written.partition_values,
        "size": written.size,
        "modificationTime": written.modification_time,
        "dataChange": False,
        "stats": written.stats,
    }


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
