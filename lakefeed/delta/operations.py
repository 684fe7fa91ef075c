"""The Delta engine's row and table changes: update, delete, optimize, restore, CHECK
constraints — each one delta-rs operation and one Delta commit, exactly once with a ``txn``.

Every change goes through :func:`change`: the table must be readable and writable by lakefeed,
a change whose :class:`Txn` the table holds already is skipped (a micro-batch replayed after a
crash changes nothing), one that rightly changed no row still records its ``txn``, delta-rs's
errors become lakefeed's (with codes) and lakefeed's post-commit hooks follow the commit
(:mod:`~lakefeed.delta.post_commit`). MERGE is :mod:`lakefeed.delta.merger`, creating a table
:mod:`lakefeed.delta.create`, vacuum :func:`lakefeed.delta.table.vacuum`.

    from lakefeed.delta import operations
    operations.delete(root, "day < '2026-01-01'")
    operations.update(root, {"status": "'closed'"}, "id = 7", txn=operations.Txn("app", 3))
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError
from deltalake.exceptions import DeltaError as RsDeltaError
from deltalake.transaction import CommitProperties, Transaction

from lakefeed.core.errors import ConflictError, DeltaError
from lakefeed.delta import (
    clustering,
    commit,
    constraints,
    dv_write,
    features,
    generated,
    identity,
    log,
    log_append,
    log_writer,
    options,
    post_commit,
    replay,
    rewrite,
)
from lakefeed.delta import restore as own_restore
from lakefeed.delta.errors import (
    CLUSTERING_WITH_ZORDER,
    CONSTRAINT_EXISTS,
    CONSTRAINT_MISSING,
    NEW_VIOLATION,
    DeltaOperationError,
    translate_merge_error,
    unsupported,
)

OWN_COMMITS = ("DELETE", "UPDATE", "MERGE", "OPTIMIZE", "RESTORE")
"""Changes with paths that commit themselves (deletion-vector DELETE, UPDATE and MERGE:
:mod:`.dv_write`, :mod:`.dv_merge`; OPTIMIZE: :func:`.rewrite.compact`; RESTORE:
:mod:`.restore`): they may go into tables only lakefeed's own commits write (:mod:`.features`)."""
Call = Callable[[DeltaTable, dict[str, Any]], Mapping[str, Any]]
"""One delta-rs operation on an open table, given :func:`commit_args`; its metrics."""


class Txn:
    """A ``(appId, version)`` pair carried by an idempotent change; a stream's batch also
    carries its source ``offsets`` hash (see :mod:`lakefeed.delta.replay`)."""

    def __init__(self, app_id: str, version: int, offsets: str | None = None) -> None:
        if not app_id:
            raise DeltaOperationError("a transaction needs a non-empty appId")
        self.app_id = str(app_id)
        self.version = int(version)
        self.offsets = offsets

    def done(self, table: DeltaTable, root: str) -> bool:
        """Whether ``table`` (at ``root``) holds this change already; a stream's batch held
        under other source offsets is refused (``CHECKPOINT_BEHIND_TABLE``)."""
        committed = table.transaction_version(self.app_id)
        replay.check(root, self.app_id, self.version, committed, self.offsets)
        return committed is not None and committed >= self.version

    def done_at(self, root: str) -> bool:
        """:meth:`done` for the table at ``root`` as it is now."""
        return self.done(log.open_table(root), root)


def own_marks(txn: Txn | None) -> dv_write.Marks | None:
    """``txn`` as the marks a change lakefeed commits itself writes (its ``txn`` action and the
    batch's source offsets), None without one."""
    return None if txn is None else (txn.app_id, txn.version, txn.offsets)


def commit_properties(txn: Txn | None) -> CommitProperties:
    """lakefeed's commitInfo (its engine, a stream batch's ``sourceOffsets``) and ``txn``."""
    offsets = {replay.OFFSETS: txn.offsets} if txn is not None and txn.offsets else {}
    return CommitProperties(
        custom_metadata={**offsets, "engineInfo_lakefeed": "lakefeed"},
        app_transactions=[Transaction(txn.app_id, txn.version)] if txn else None,
    )


def commit_args(txn: Txn | None) -> dict[str, Any]:
    """The commit arguments of every delta-rs change: its properties, and no post-commit hooks
    of delta-rs's (they raise after the commit: :mod:`lakefeed.delta.post_commit`
    runs them without failing the change)."""
    return {
        "commit_properties": commit_properties(txn),
        "post_commithook_properties": post_commit.NO_HOOKS,
    }


def run(operation: str, root: str, call: Callable[[], Any]) -> Any:
    """Run a delta-rs call, turning its errors into lakefeed's (with codes)."""
    try:
        return call()
    except CommitFailedError as error:
        refused = features.translate_rs(error, root, operation)
        if refused is not None:
            raise refused from error
        raise ConflictError(
            f"{operation} on {root} conflicted with another commit: {error}",
            fix="retry; if a replayed stream batch raced its zombie, run one query per checkpoint",
        ) from error
    except RsDeltaError as error:
        translated = translate_merge_error(error) if operation == "MERGE" else None
        translated = translated or _violation(error, root)
        raise translated or DeltaOperationError(
            f"{operation} on {root} failed in delta-rs: {error}"
        ) from error


def _violation(error: RsDeltaError, root: str) -> DeltaError | None:
    """delta-rs's failed constraint check as Delta's ``DELTA_VIOLATE_CONSTRAINT_WITH_VALUES``
    (naming the table's constraints, read only on this failure path)."""
    if not constraints.rs_violation(error):
        return None
    table = log.rs_table(root)
    checks = constraints.of_table(table.metadata().configuration, table.schema())
    return constraints.translate_rs(error, checks, root)


def change(root: str, operation: str, call: Call, txn: Txn | None = None) -> dict[str, Any] | None:
    """One idempotent delta-rs change of the table at ``root``; its metrics, or None when its
    ``txn`` is already committed."""
    table = log.open_table(root)
    log.check_readable(table, root, features.WRITES_KEEP, f"lakefeed's {operation}")
    features.check_writable(table, root, operation, own_commit=operation in OWN_COMMITS)
    if txn is not None and txn.done(table, root):
        return None
    before = table.version()
    args = commit_args(txn)
    result = run(operation, root, lambda: call(table, args))
    if txn is not None and table.version() == before:  # delta-rs commits no empty change
        _record_txn(table, root, operation, txn, args["commit_properties"])
    # delta-rs's operations leave their handle at the version they committed
    if table.version() > before:
        configuration = table.metadata().configuration
        post_commit.run(root, configuration, table.version(), before, lambda: table)
    return dict(result)


def _record_txn(
    table: DeltaTable, root: str, operation: str, txn: Txn, properties: CommitProperties
) -> None:
    """A change that changed nothing still records its ``txn`` (:func:`commit.record_txn`);
    through lakefeed's own log writer where the table needs it (:mod:`.features`)."""
    if not features.needs_own_commit(table):
        run(operation, root, lambda: commit.record_txn(table, properties))
        return
    info = log_writer.commit_info(operation, {})["commitInfo"]
    if txn.offsets:
        info[replay.OFFSETS] = txn.offsets
    log_append.commit(root, table.version(), [], False, (txn.app_id, txn.version), info)
    table.update_incremental()


def rs_fallback(table: DeltaTable, root: str, operation: str) -> None:
    """Before delta-rs runs a change lakefeed's own commits did not take: refuse a table whose
    writer features delta-rs would refuse at its commit, after writing its files, and an
    UPDATE or MERGE of a table with generated columns (:func:`_refuse_generated`)."""
    features.check_writable(table, root, operation)
    if operation in ("MERGE", "UPDATE"):
        _refuse_generated(operation, table)


def _refuse_generated(operation: str, table: DeltaTable) -> None:
    """delta-rs's MERGE and UPDATE do not recompute generated columns as Delta does: an update
    of a column they derive from fails delta-rs's check, and camelCase names fail its SQL
    (checked with deltalake 1.6.6), so both are refused on such tables before anything runs
    (lakefeed's own, with deletion vectors, recompute them: :mod:`.generation`)."""
    columns = generated.expressions(table.schema())
    if columns:
        names = ", ".join(f"{name} = {expression}" for name, expression in columns)
        unsupported(
            operation,
            f"the table has generated columns ({names}), which delta-rs's {operation} does not "
            "recompute",
            "turn deletion vectors on (ALTER TABLE ... SET TBLPROPERTIES "
            "('delta.enableDeletionVectors' = 'true')): lakefeed's own UPDATE and MERGE "
            "recompute generated columns; or delete the rows and append their new versions",
        )


def update(
    root: str, updates: Mapping[str, str], predicate: str | None = None, txn: Txn | None = None
) -> dict[str, Any] | None:
    """Set columns (SQL text per column) of the rows matching ``predicate`` (all without one):
    with deletion vectors and new files where the table enables them (:mod:`.dv_write`)."""
    values = dict(updates)
    marks = own_marks(txn)

    def call(table: DeltaTable, args: dict[str, Any]) -> Mapping[str, Any]:
        identity.check_update(identity.of_schema(table.schema()), values, root)
        marked = dv_write.update(table, root, values, predicate, marks)
        if marked is not None:
            return marked
        rs_fallback(table, root, "UPDATE")
        return table.update(updates=values, predicate=predicate, **args)

    return change(root, "UPDATE", call, txn)


def delete(
    root: str, predicate: str | None = None, txn: Txn | None = None
) -> dict[str, Any] | None:
    """Delete the rows matching ``predicate`` (every row without one): with deletion vectors
    where the table enables them (:mod:`~lakefeed.delta.dv_write`), else by rewriting files."""
    marks = own_marks(txn)

    def call(table: DeltaTable, args: dict[str, Any]) -> Mapping[str, Any]:
        marked = dv_write.delete(table, root, predicate, marks)
        if marked is not None:
            return marked
        rs_fallback(table, root, "DELETE")
        return table.delete(predicate, **args)

    return change(root, "DELETE", call, txn)


def optimize(
    root: str,
    partition_filters: list[tuple[str, str, Any]] | None = None,
    z_order: list[str] | None = None,
    txn: Txn | None = None,
) -> dict[str, Any] | None:
    """Compact small files (Z-ordered by ``z_order`` when given), in the partitions
    ``partition_filters`` select (all without); then rewrite the files whose deletion vectors
    delete many of their rows without them, as delta-spark's OPTIMIZE (:func:`rewrite.purge`).
    Where delta-rs's OPTIMIZE refuses the table (column mapping, the writer features of
    :data:`.features.OWN_COMMIT`), lakefeed compacts, clusters and purges in one commit of its
    own (:func:`rewrite.compact`); Z-ordering is refused there, on a clustered table as
    delta-spark refuses it (``DELTA_CLUSTERING_WITH_ZORDER_BY``)."""
    marks = own_marks(txn)

    def call(table: DeltaTable, args: dict[str, Any]) -> Mapping[str, Any]:
        if z_order is not None:
            _refuse_zorder_clustered(table, root, z_order)
        if rewrite.own(table):
            return _compact_own(table, root, partition_filters, z_order, marks)
        if z_order is None:
            done = table.optimize.compact(partition_filters=partition_filters, **args)
        else:
            done = table.optimize.z_order(z_order, partition_filters=partition_filters, **args)
        table.update_incremental()
        purged = rewrite.purge(table, root, partition_filters, marks)
        return {**done, "numDeletionVectorsPurged": purged}

    return change(root, "OPTIMIZE", call, txn)


def _refuse_zorder_clustered(table: DeltaTable, root: str, z_order: list[str]) -> None:
    """delta-spark's refusal of ``OPTIMIZE ... ZORDER BY`` on a liquid-clustered table."""
    cluster_by = clustering.columns_of(root, table)
    if cluster_by:
        raise DeltaOperationError(
            f"OPTIMIZE of the Delta table {root} with liquid clustering cannot specify ZORDER BY "
            f"({', '.join(z_order)}): it is clustered by {', '.join(cluster_by)}; nothing was "
            "written",
            fix="run OPTIMIZE without ZORDER BY (it clusters by the clustering columns), or "
            "change them with ALTER TABLE ... CLUSTER BY",
            code=CLUSTERING_WITH_ZORDER,
        )


def _compact_own(
    table: DeltaTable,
    root: str,
    partition_filters: list[tuple[str, str, Any]] | None,
    z_order: list[str] | None,
    marks: dv_write.Marks | None,
) -> Mapping[str, Any]:
    """OPTIMIZE by :func:`rewrite.compact`; refused (nothing written) where that does not
    reach: Z-ordering, object storage, a log the replay does not know."""
    done = None if z_order is not None else rewrite.compact(table, root, partition_filters, marks)
    if done is None:
        unsupported(
            "OPTIMIZE" if z_order is None else "OPTIMIZE ... ZORDER BY",
            f"delta-rs's OPTIMIZE refuses the table {root} (column mapping, or writer features "
            f"{sorted(features.writer_features(table) & features.OWN_COMMIT)}); lakefeed "
            "compacts such tables itself only without Z-ordering, on local or mounted storage",
            "run OPTIMIZE without ZORDER BY, on a table outside object storage",
        )
    return done


def restore(root: str, target: int | dt.datetime, txn: Txn | None = None) -> dict[str, Any] | None:
    """Make version ``target`` (or the one at a time) the table's content again: by delta-rs,
    or where it refuses the table's writer features by lakefeed's own commit
    (:mod:`.restore`)."""
    marks = own_marks(txn)

    def call(table: DeltaTable, args: dict[str, Any]) -> Mapping[str, Any]:
        if features.needs_own_commit(table):
            version = target if isinstance(target, int) else _version_at(root, target)
            done = own_restore.restore(table, root, version, marks)
            if done is not None:
                return done
        rs_fallback(table, root, "RESTORE")
        return table.restore(target, **args)

    return change(root, "RESTORE", call, txn)


def _version_at(root: str, when: dt.datetime) -> int:
    """The version a ``timestampAsOf`` read at ``when`` sees (RESTORE ... TIMESTAMP AS OF)."""
    found = options.time_travel_version(root, {"timestampAsOf": when.isoformat()})
    return int(found or 0)


def add_constraint(
    root: str, name: str, expression: str, violations: Callable[[str], int] | None = None
) -> None:
    """``ALTER TABLE ... ADD CONSTRAINT name CHECK (expression)``, as delta-spark: the name is
    kept lower-cased, a name in use is refused, and so is a predicate that rows already in the
    table break (``violations(expression)`` counts them, Spark's SQL being the one Delta
    checks with; without it delta-rs checks: ``DELTA_NEW_CHECK_CONSTRAINT_VIOLATION``)."""
    key = name.lower()
    table = log.open_table(root)
    existing = constraints.of_table(table.metadata().configuration, None)
    old = next((e for n, e in existing if n.lower() == key), None)
    if old is not None:
        raise DeltaOperationError(
            f"Constraint '{key}' already exists. Please delete the old constraint first.\n"
            f"Old constraint:\n{old}",
            fix=f"ALTER TABLE ... DROP CONSTRAINT {key}, then add the new one",
            code=CONSTRAINT_EXISTS,
        )
    broken = violations(expression) if violations is not None else 0
    if broken:
        raise DeltaError(
            f"{broken} rows in {root} violate the new CHECK constraint ({expression})",
            fix="fix or delete those rows first (DELETE FROM ... WHERE NOT (...)), or relax "
            "the constraint",
            code=NEW_VIOLATION,
        )
    run(
        "ADD CONSTRAINT",
        root,
        lambda: table.alter.add_constraint({key: expression}, **commit_args(None)),
    )


def drop_constraint(root: str, name: str, if_exists: bool) -> None:
    """``ALTER TABLE ... DROP CONSTRAINT [IF EXISTS] name``."""
    table = log.open_table(root)
    existing = constraints.of_table(table.metadata().configuration, None)
    found = next((n for n, _ in existing if n.lower() == name.lower()), None)
    if found is None:
        if if_exists:
            return
        raise DeltaOperationError(
            f"Cannot drop nonexistent constraint {name.lower()} from table {root}",
            fix="give IF EXISTS to accept a missing constraint",
            code=CONSTRAINT_MISSING,
        )
    run(
        "DROP CONSTRAINT",
        root,
        lambda: table.alter.drop_constraint(found, **commit_args(None)),
    )
