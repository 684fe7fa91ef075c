"""Driver-side commits of written files into a Delta table, Spark-free.

A streaming micro-batch is one Delta commit carrying a ``txn`` action (app id = the query id,
version = the batch id), like Spark's native Delta sink: a batch replayed after a crash finds
its id already committed and is skipped, and the files the replay wrote are removed. Files of
attempts that never committed are removed when their batch finally commits (or is skipped), so
nobody listing the folder trips over them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    Transaction,
    create_table_with_add_actions,
)

from lakefeed.core import storage
from lakefeed.core.errors import ConflictError, DeltaError
from lakefeed.delta import (
    alter,
    clustering,
    constraints,
    features,
    identity,
    log,
    log_append,
    log_writer,
    mapping,
    post_commit,
    replay,
)
from lakefeed.delta.errors import (
    CONSTRAINTS_CHANGED,
    FEATURE_UNSUPPORTED,
    MISSING_NOT_NULL,
    NOT_NULL,
    PARTITION_NOT_FOUND,
)
from lakefeed.delta.files import WrittenFile, app_tag, local_path, now_ms, parse_stream_file
from lakefeed.delta.identity import Identity
from lakefeed.delta.mapping import ColumnMapping
from lakefeed.delta.schema import (
    SchemaMismatchError,
    as_nullable,
    merge_schema,
    table_arrow_schema,
)
from lakefeed.delta.snapshot import Snapshot, for_stream

# Called as hook(table root, batch id) right after a stream batch's Delta commit, before Spark
# writes its own commit log: the moment a crash test kills its driver at (it appends a hook in
# its driver script). lakefeed itself adds none.
AFTER_COMMIT: list[Callable[[str, int], None]] = []


BLIND_RETRIES = 10
_READ_DELETED = "a concurrent transaction deleted data this operation read"
"""delta-rs's conflict for an append that committed after a DELETE, UPDATE or MERGE removed
files: it takes every transaction to have read the whole table. An append is blind (its rows
do not come from the table's files), which Delta's rules let commit over such removals, as
delta-spark's batch and stream appends do: so it is committed again on the newest version."""


@dataclass(frozen=True)
class WriteSpec:
    """What a write asks of the table, resolved on the driver before any task runs."""

    root: str
    mode: str  # "append" | "overwrite"
    partition_by: tuple[str, ...]
    merge_schema: bool = False
    overwrite_schema: bool = False
    operation: str = "WRITE"
    generated: tuple[tuple[str, str], ...] = ()  # (column, expression): generated.apply
    checks: tuple[tuple[str, str], ...] = ()  # (name, predicate): constraints.apply
    user_metadata: str | None = None  # the userMetadata option: commitInfo.userMetadata
    source_offsets: str | None = None  # a stream batch's source offsets hash (see .replay)
    columns: ColumnMapping | None = None  # the table's column mapping, new columns included
    evolved: str | None = None  # under column mapping: the schema JSON with the new columns
    identities: tuple[Identity, ...] = ()  # identity columns whose values the write generates

    @property
    def computed(self) -> tuple[str, ...]:
        """The columns Spark computes for the write (generated and identity columns)."""
        identities = tuple(f"{c.name} (identity)" for c in self.identities)
        return tuple(name for name, _ in self.generated) + identities

    @property
    def file_partition_by(self) -> tuple[str, ...]:
        """The partition columns as files and the log name them (physical names)."""
        if self.columns is None or not self.columns.active:
            return self.partition_by
        names = self.columns.physical_names()
        return tuple(names[c] for c in self.partition_by)

    def physical(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` under the names (and field ids) the table's files use."""
        if self.columns is None or not self.columns.active:
            return batch
        return mapping.to_physical(batch, mapping.physical_schema(self.columns, batch.schema))

    def commit_info(self) -> dict[str, str]:
        """What the write adds to its commitInfo (delta-rs writes these keys at its top)."""
        given = {"userMetadata": self.user_metadata} if self.user_metadata is not None else {}
        if self.source_offsets is not None:
            given[replay.OFFSETS] = self.source_offsets
        return {**given, "engineInfo_lakefeed": "lakefeed"}


@dataclass(frozen=True)
class CommitResult:
    version: int | None  # the new table version; None when skipped
    skipped: bool = False
    removed_orphans: int = 0
    deferred: tuple[post_commit.Deferred, ...] = ()  # post-commit steps that failed


def resolve_partitioning(
    root: str, requested: Sequence[str], table: DeltaTable | None
) -> tuple[str, ...]:
    """Partition columns for a write: the table's own (``table``, None while there is none); a
    different request is refused."""
    existing = list(table.metadata().partition_columns) if table is not None else None
    if existing is None or not requested:
        return tuple(existing if existing is not None else requested)
    if [c.lower() for c in existing] != [c.lower() for c in requested]:
        raise SchemaMismatchError(
            f"the Delta table {root} is partitioned by {existing or 'nothing'}, the write asks "
            f"for {list(requested)}: drop the partitionBy option, or write to a new table"
        )
    return tuple(existing)


def check_partition_columns(schema: pa.Schema, partition_by: Sequence[str], root: str) -> None:
    """delta-spark's ``checkPartitionColumns``: a write must give every partition column (a
    missing one is not written as null, unlike other columns: its value names the folder) and
    at least one other column."""
    missing = [c for c in partition_by if c not in schema.names]
    if missing:
        raise SchemaMismatchError(
            f"Partition column `{missing[0]}` not found in schema [{', '.join(schema.names)}] "
            f"(writing the Delta table {root}, partitioned by {list(partition_by)})",
            fix="give the column in the written rows (F.lit(None).cast(...) for nulls: Delta "
            "writes each row into the folder of its partition values), or, for a new table, "
            "partition by columns the data has",
            code=PARTITION_NOT_FOUND,
        )
    if partition_by and len(partition_by) == len(schema):
        raise SchemaMismatchError("a Delta table cannot be partitioned by all of its columns")


def check_required_columns(table: pa.Schema, data: pa.Schema, root: str) -> None:
    """Delta's ``DELTA_MISSING_NOT_NULL_COLUMN_VALUE``: a NOT NULL column may not be left out
    of a write (other columns may: they read as null)."""
    given = {name.lower() for name in data.names}
    for field in table:
        if not field.nullable and field.name.lower() not in given:
            raise SchemaMismatchError(
                f"Column {field.name}, which has a NOT NULL constraint, is missing from the "
                f"data being written into the table {root}",
                fix=f"give the column {field.name!r} a value in every written row",
                code=MISSING_NOT_NULL,
            )


def check_not_null(
    table: pa.Schema,
    files: Sequence[WrittenFile],
    root: str,
    physical: Mapping[str, str] | None = None,
) -> None:
    """Refuse files with nulls in the table's NOT NULL columns (Delta's writers must), from the
    files' ``nullCount`` statistics and partition values; no data is read again. A column whose
    count is unknown (a footer without it) is let through. ``physical``: the names files and
    the log use, under column mapping."""
    required = [f.name for f in table if not f.nullable]
    for file in files if required else ():
        counts = json.loads(file.stats).get("nullCount") or {}
        for name in required:
            key = (physical or {}).get(name, name)
            null_partition = key in file.partition_values and file.partition_values[key] is None
            if counts.get(key) or null_partition:
                raise SchemaMismatchError(
                    f"NOT NULL constraint violated for column {name!r} of the Delta table {root}: "
                    "the data has nulls there",
                    fix=f"filter or fill the nulls first (df.na.drop(subset=[{name!r}])), or "
                    "write to a table where the column is nullable",
                    code=NOT_NULL,
                )


def check_constraints_known(spec: WriteSpec, table: DeltaTable) -> None:
    """Refuse to commit files checked against fewer constraints than the table now has (one was
    added while they were written): a retry writes them again under the new ones."""
    now = constraints.of_table(table.metadata().configuration, table.schema())
    added = [name for name, predicate in now if (name, predicate) not in spec.checks]
    if added and not (spec.mode == "overwrite" and spec.overwrite_schema):
        raise ConflictError(
            f"the Delta table {spec.root} got CHECK constraints ({', '.join(added)}) while this "
            "write's rows were checked against the earlier ones",
            fix="retry the write: it checks the rows against the table's constraints of now",
            code=CONSTRAINTS_CHANGED,
        )


def _actions(files: Sequence[WrittenFile]) -> list[AddAction]:
    return [
        AddAction(f.path, f.size, f.partition_values, f.modification_time, True, f.stats)
        for f in files
    ]


def commit_files(
    spec: WriteSpec,
    files: Sequence[WrittenFile],
    data_schema: pa.Schema,
    txn: tuple[str, int] | None = None,
    metadata: dict | None = None,
    snapshot: Snapshot | None = None,
    refresh: bool = True,
) -> CommitResult:
    """Commit ``files`` as one Delta version, or skip when ``txn`` is already committed.

    ``snapshot``: the writer's open table (a stream's, kept across its batches); else the table
    is opened for this commit. ``refresh=False``: the caller brought ``snapshot`` up to date
    just before writing ``files`` (its replay check); the commit goes against that version
    instead of listing the log again. That is safe: delta-rs checks every commit made since
    the version a transaction read (one with the same ``txn`` app id fails it).
    """
    properties = CommitProperties(
        custom_metadata={**(metadata or {}), **spec.commit_info()},
        app_transactions=[Transaction(*txn)] if txn else None,
    )
    opened = snapshot or Snapshot(spec.root)
    table = opened.for_commit(refresh)
    if table is None:
        created = _create(spec, files, data_schema, properties, txn)
        if created is not None:
            opened.note_commit(txn)
            return _after(spec.root, created, opened, {})
        # Another writer created the table first: commit against it like any append.
        table = opened.latest()
        if table is None:
            raise DeltaError(f"the Delta table {spec.root} vanished while it was created")
    if txn is not None and opened.committed(txn, spec.source_offsets):
        return CommitResult(None, skipped=True)
    features.check_writable(table, spec.root, spec.operation, own_commit=True)
    own = features.needs_own_commit(table)
    check_constraints_known(spec, table)
    alter.check_columns(table, spec.columns, data_schema.names, spec.root)
    current = table_arrow_schema(table.schema())
    mapped = log.table_mapping(table).active
    if spec.mode == "overwrite" and spec.overwrite_schema:
        schema = as_nullable(data_schema)
    else:
        check_required_columns(current, data_schema, spec.root)
        physical = spec.columns.physical_names() if spec.columns and mapped else None
        check_not_null(current, files, spec.root, physical)
        schema = merge_schema(current, data_schema, merge=spec.merge_schema, path=spec.root)
        if len(schema) > len(current) and mapped:
            alter.add_columns(spec.root, table, spec.evolved, schema.names[len(current) :])
            table.update_incremental()
        elif len(schema) > len(current) and own:
            _add_columns(spec.root, table, list(schema)[len(current) :])
            table.update_incremental()
        elif len(schema) > len(current):
            # delta-rs keeps the old metadata on a data commit: add the columns first (a crash
            # in between leaves new, empty columns, which readers take as nulls).
            added = DeltaSchema.from_arrow(pa.schema(list(schema)[len(current) :]))
            table.alter.add_columns(
                list(added.fields), post_commithook_properties=post_commit.NO_HOOKS
            )
            table.update_incremental()
    if spec.mode == "append" and not files and schema.names == current.names and txn is None:
        return CommitResult(table.version())
    if own:
        # under column mapping the table's schema stays (alter.for_write refused a new one)
        replaced = not mapped and not schema.equals(current, check_metadata=False)
        new_schema = schema if spec.overwrite_schema and replaced else None
        return _commit_own(spec, table, files, txn, metadata, opened, new_schema)
    actions, mode = list[AddAction | RemoveAction](_actions(files)), spec.mode
    if mapped and mode == "overwrite":
        # delta-rs's overwrite writes the metadata again from an Arrow schema, which breaks
        # the column mapping (checked, delta-rs 1.6.6): remove the table's files here instead
        actions, mode = actions + _removes(table, spec.root), "append"
    for attempt in range(BLIND_RETRIES + 1):
        before = table.version()
        try:
            version = _committed(
                spec.root,
                before,
                files,
                txn,
                lambda: table.create_write_transaction(
                    actions,
                    mode,
                    # a column-mapped table's own schema: its mapping lives in field metadata
                    schema=table.schema() if mapped else schema,
                    partition_by=list(spec.partition_by) or None,
                    commit_properties=properties,
                    post_commithook_properties=post_commit.NO_HOOKS,
                ),
            )
            break
        except CommitFailedError as error:
            if spec.mode != "append" or attempt == BLIND_RETRIES or _READ_DELETED not in str(error):
                raise
            table.update_incremental()  # a blind append: commit it on the newest version
            if txn is not None and (table.transaction_version(txn[0]) or -1) >= txn[1]:
                raise  # its batch committed meanwhile (a zombie): the conflict stands
    opened.note_commit(txn)
    return _after(spec.root, version, opened, table.metadata().configuration, before)


def _commit_own(
    spec: WriteSpec,
    table: DeltaTable,
    files: Sequence[WrittenFile],
    txn: tuple[str, int] | None,
    metadata: dict | None,
    opened: Snapshot,
    new_schema: pa.Schema | None,
) -> CommitResult:
    """Commit ``files`` through lakefeed's own log writer (:mod:`.log_append`): the table has
    a writer feature delta-rs refuses and lakefeed honours (:data:`features.OWN_COMMIT`).
    ``new_schema``: an ``overwriteSchema`` write's, committed with the files."""
    overwrite = spec.mode == "overwrite"
    info = {
        **log_append.info(spec.operation, overwrite, spec.partition_by),
        **(metadata or {}),
        **spec.commit_info(),
    }
    before = table.version()
    changes = [] if new_schema is None else [_replaced_schema(spec, table, new_schema)]
    changes = changes or _moved_marks(spec, table, files)
    row_ids = features.tracks_rows(table)
    version = log_append.commit(spec.root, before, files, overwrite, txn, info, changes, row_ids)
    opened.note_commit(txn)
    return _after(spec.root, version, opened, table.metadata().configuration, before)


def _moved_marks(
    spec: WriteSpec, table: DeltaTable, files: Sequence[WrittenFile]
) -> list[dict[str, Any]]:
    """The ``metaData`` action moving the high water marks of the identity columns whose
    values ``files`` hold (:mod:`.identity`); none when they hold none. Values generated from
    a mark another writer has moved since are refused."""
    identity.check_unmoved(spec.identities, identity.of_schema(table.schema()), spec.root)
    moved = identity.marks(spec.identities, files, spec.root)
    if not moved:
        return []
    text = identity.moved_schema(table.schema().to_json(), moved)
    configuration = dict(table.metadata().configuration)
    partitions = list(table.metadata().partition_columns)
    return [log_writer.metadata_action(table, text, configuration, partitions)]


def _add_columns(root: str, table: DeltaTable, added: list[pa.Field]) -> None:
    """A ``mergeSchema`` write's new columns committed through lakefeed's own log writer, before
    its data commit (as delta-rs's add_columns would, which the table's features refuse)."""
    schema = json.loads(table.schema().to_json())
    schema["fields"] += json.loads(DeltaSchema.from_arrow(pa.schema(added)).to_json())["fields"]
    names = json.dumps([field.name for field in added])
    alter.commit_metadata(root, table, "ADD COLUMNS", {"columns": names}, schema)


def _replaced_schema(spec: WriteSpec, table: DeltaTable, schema: pa.Schema) -> dict[str, Any]:
    """The ``metaData`` action of an ``overwriteSchema`` write (the table's properties kept);
    a clustered table keeps its clustering columns."""
    clustering.kept_in(spec.root, table, schema)
    text = DeltaSchema.from_arrow(schema).to_json()
    configuration = dict(table.metadata().configuration)
    return log_writer.metadata_action(table, text, configuration, list(spec.partition_by))


def _removes(table: DeltaTable, root: str) -> list[AddAction | RemoveAction]:
    """``remove`` actions of every file of ``table`` (an overwrite's); delta-rs lists the
    paths as the log has them (URL-encoded) and encodes what it is given. delta-rs's
    ``RemoveAction`` cannot carry a file's deletion vector, without which the remove would not
    match its ``add``: such a table is refused before anything is written."""
    if log.file_deletes(table, root):
        raise DeltaError(
            f"an overwrite of the column-mapped Delta table {root}, whose files carry deletion "
            "vectors, is refused: nothing was written",
            fix="delete the rows with DELETE and append, or rewrite the table with delta-spark",
            code=FEATURE_UNSUPPORTED,
        )
    current = pa.table(table.get_add_actions(flatten=True))
    now = now_ms()
    return [
        RemoveAction(unquote(path), True, now, size)
        for path, size in zip(
            current.column("path").to_pylist(),
            current.column("size_bytes").to_pylist(),
            strict=True,
        )
    ]


def record_txn(table: DeltaTable, properties: CommitProperties) -> None:
    """An otherwise empty commit carrying ``properties``' ``txn``: a batch that rightly changed
    nothing (a MERGE of stale CDC changes, of no rows) still records that it ran, as
    delta-spark's sink commits every batch's ``SetTransaction``. Without it the table's txn stays
    at an older batch than the checkpoint's, which the checkpoint guard cannot tell from a table
    whose log went back."""
    table.create_write_transaction(
        [],
        "append",
        schema=table.schema(),
        partition_by=list(table.metadata().partition_columns) or None,
        commit_properties=properties,
        post_commithook_properties=post_commit.NO_HOOKS,  # a checkpoint due waits for a write
    )


def _create(
    spec: WriteSpec,
    files: Sequence[WrittenFile],
    data_schema: pa.Schema,
    properties: CommitProperties,
    txn: tuple[str, int] | None,
) -> int | None:
    """Create the table with ``files`` as its version 0; None when another writer's table is
    there first (the log, not the error, says whose version 0 it is)."""
    try:
        return _committed(
            spec.root,
            -1,
            files,
            txn,
            lambda: create_table_with_add_actions(
                spec.root,
                DeltaSchema.from_arrow(as_nullable(data_schema)),
                _actions(files),
                mode="append",
                partition_by=list(spec.partition_by) or None,
                storage_options=storage.delta_options(spec.root),
                commit_properties=properties,
                post_commithook_properties=post_commit.NO_HOOKS,
            ),
        )
    except Exception:
        if log.latest_version(spec.root) is None:
            raise
        return None


def _committed(
    root: str,
    before: int,
    files: Sequence[WrittenFile],
    txn: tuple[str, int] | None,
    call: Callable[[], object],
) -> int:
    """Run the commit ``call`` made on version ``before``; the version it committed. A call that
    raises committed nonetheless when the log holds the write (:func:`post_commit.landed`):
    then the write goes on (its files must stay), with a warning; else the error escapes."""
    try:
        call()
    except Exception as error:
        version = post_commit.landed(root, before, [f.path for f in files], txn)
        if version is None:
            raise
        post_commit.Deferred("commit", root, version, f"{type(error).__name__}: {error}").report()
        return version
    return before + 1


def _after(
    root: str,
    version: int,
    opened: Snapshot,
    configuration: Mapping[str, str],
    since: int = -1,
) -> CommitResult:
    """The hooks after a commit (:mod:`~lakefeed.delta.post_commit`): they never
    fail it; what they defer is in the result."""
    deferred = post_commit.run(root, configuration, version, since, opened.latest)
    return CommitResult(version, deferred=deferred)


def commit_stream_batch(
    spec: WriteSpec,
    files: Sequence[WrittenFile],
    data_schema: pa.Schema,
    app_id: str,
    batch_id: int,
    sweep: bool = True,
    refresh: bool = True,
) -> CommitResult:
    """One micro-batch = one Delta commit with txn(app_id, batch_id); replays are skipped.

    ``sweep``: then look for files of other attempts of this batch to remove (listing every
    folder the batch wrote to, the table's root included: on object storage a listing grows with
    the table). A writer that knows there were none passes False: Spark's staged writer after
    its run's first batch (files of failed tasks stay in staging; only a run's first batch can
    repeat a batch an earlier run started). ``refresh``: see :func:`commit_files`.
    """
    try:
        result = commit_files(
            spec,
            files,
            data_schema,
            txn=(app_id, batch_id),
            metadata={"lakefeed.queryId": app_id, "lakefeed.batchId": batch_id},
            snapshot=for_stream(spec.root, app_id),
            refresh=refresh,
        )
    except CommitFailedError as error:
        refused = features.translate_rs(error, spec.root, spec.operation)
        if refused is not None:
            raise refused from error
        raise ConflictError(
            f"commit of batch {batch_id} to {spec.root} failed: {error}",
            fix="another query with the same checkpoint may be writing to this table: run one "
            "query per checkpoint",
        ) from error
    if not result.skipped:
        for hook in AFTER_COMMIT:
            hook(spec.root, batch_id)
    if not sweep:
        return result
    try:
        keep = (
            {_norm(storage.join(spec.root, f.path)) for f in files}
            if not result.skipped
            else _committed_paths(spec.root, app_id, batch_id)
        )
        removed = remove_uncommitted(spec.root, app_id, batch_id, keep, files)
    except Exception as error:  # noqa: BLE001 - the batch is committed: orphans wait for vacuum
        failed = post_commit.Deferred(
            "removal of uncommitted attempts", spec.root, result.version or 0, str(error)
        )
        failed.report()
        return CommitResult(result.version, result.skipped, 0, (*result.deferred, failed))
    return CommitResult(result.version, result.skipped, removed, result.deferred)


def _committed_paths(root: str, app_id: str, batch_id: int) -> set[str] | None:
    """Local paths the commit carrying txn(app_id, batch_id) added; None if not found."""
    found = log.txn_commit(root, app_id, batch_id)
    if found is None:
        return None
    return {_norm(local_path(root, a["add"]["path"])) for a in found[1] if "add" in a}


def remove_uncommitted(
    root: str,
    app_id: str,
    batch_id: int,
    keep: set[str] | None,
    files: Sequence[WrittenFile],
) -> int:
    """Delete this query's files of ``batch_id`` that its Delta commit does not hold.

    Only files named as this query's batch ``batch_id`` are candidates: earlier batches are
    committed (or skipped and cleaned) before Spark starts the next one, and files of other
    writers are never touched. When the committed set is unknown, nothing is deleted.
    """
    if keep is None:
        return 0
    tag = app_tag(app_id)
    folders = {storage.dirname(storage.join(root, f.path)) for f in files} | {root}
    folders |= {storage.dirname(p) for p in keep}
    removed = 0
    for folder in folders:
        for path in _stream_files(folder, tag, batch_id):
            if _norm(path) not in keep and storage.remove(path):
                removed += 1
    return removed


def _norm(path: str) -> str:
    """Local paths compared in normal form; object keys are compared as written."""
    return path if storage.is_object_store(path) else os.path.normpath(path)


def _stream_files(folder: str, tag: str, batch_id: int) -> list[str]:
    names = storage.list_names(folder)
    return [storage.join(folder, n) for n in names if parse_stream_file(n) == (tag, batch_id)]
