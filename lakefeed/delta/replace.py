"""Selective overwrites of a batch write: Delta's ``replaceWhere``, and the ones lakefeed refuses.

``df.write.format("delta").mode("overwrite").option("replaceWhere", pred)`` replaces only the
rows matching ``pred``, in one commit, after checking that every written row matches it
(``DELTA_REPLACE_WHERE_MISMATCH``; off with
``spark.databricks.delta.replaceWhere.constraintCheck.enabled=false``). Spark's file writer has
no row-level delete, so such a write goes to delta-rs (``write_deltalake(mode="overwrite",
predicate=...)``, which rewrites the matching files and adds the rows in one commit) with the
rows as Arrow on the driver, like a MERGE source: a replaceWhere write is a slice, not a table.
Into a table with writer features delta-rs refuses (:data:`.features.OWN_COMMIT`: clustered,
in-commit-timestamp, domain-metadata, row-tracking tables) lakefeed commits it itself, as a
deletion-vector change (:func:`.dv_write.replace`: the matching rows marked deleted, the new
rows in new files, one ``WRITE`` commit keeping the domains, with an in-commit timestamp and
fresh row ids for the new rows); where that does not apply (deletion vectors not enabled, a
predicate lakefeed cannot evaluate, new columns) it is refused before anything is written.

Before, these options were ignored and the write overwrote the whole table. Delta's other
selective overwrites (``replaceUsing``, ``replaceOn``, dynamic partition overwrites) are
refused with what to use instead: never a silent full overwrite.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import DeltaError as RsDeltaError
from pyspark.sql import DataFrame

from lakefeed.core import storage
from lakefeed.core.errors import DeltaError
from lakefeed.core.options import Options
from lakefeed.delta import dv_write, features, generated, log, post_commit
from lakefeed.delta.commit import WriteSpec
from lakefeed.delta.errors import REPLACE_WHERE_MISMATCH as MISMATCH
from lakefeed.delta.errors import UNSUPPORTED, DeltaOperationError, unsupported
from lakefeed.delta.schema import table_arrow_schema

_REFUSED = {
    "replaceUsing": "replaceWhere with a predicate on the key columns, or DeltaTable.merge",
    "replaceOn": "replaceWhere, or DeltaTable.merge with whenMatchedDelete and an insert",
}


def predicate(options: Mapping[str, str], mode: str, session_mode: str | None) -> str | None:
    """The ``replaceWhere`` predicate of an overwrite (None for a plain write); the selective
    overwrites lakefeed cannot do are refused here, before anything is written.
    ``session_mode``: the session's ``spark.sql.sources.partitionOverwriteMode``."""
    opts = Options(options)
    for name, instead in _REFUSED.items():
        if opts.get(name) is not None:
            raise DeltaOperationError(
                f"the write option {name} (Delta 4.3's selective overwrite) is not supported "
                "by lakefeed's Delta",
                fix=f"use {instead}",
                code=UNSUPPORTED,
            )
    dynamic = opts.get("partitionOverwriteMode") or session_mode
    if mode == "overwrite" and str(dynamic).lower() == "dynamic":
        raise DeltaOperationError(
            "dynamic partition overwrite (partitionOverwriteMode=dynamic) is not supported by "
            "lakefeed's Delta; the write would replace the whole table",
            fix="overwrite the partitions with .option('replaceWhere', '<partition predicate>')",
            code=UNSUPPORTED,
        )
    where = opts.get("replaceWhere")
    return where if where and mode == "overwrite" else None


def replace_where(
    frame: DataFrame,
    spec: WriteSpec,
    where: str,
    txn: tuple[str, int] | None,
) -> None:
    """Replace the rows of ``spec.root`` matching ``where`` by ``frame``'s rows, one commit."""
    table = log.rs_table(spec.root)
    features.check_writable(table, spec.root, "replaceWhere", own_commit=True)
    frame = generated.apply(frame, spec.generated)
    _check_rows(frame, where, spec.root)
    if features.needs_own_commit(table):
        _replace_own(table, frame, spec, where, txn)
        return
    before = log.latest_version(spec.root)
    try:
        write_deltalake(
            spec.root,
            frame.toArrow(),
            mode="overwrite",
            predicate=where,
            schema_mode="merge" if spec.merge_schema else None,
            storage_options=storage.delta_options(spec.root),
            commit_properties=CommitProperties(
                custom_metadata=spec.commit_info(),
                app_transactions=[Transaction(*txn)] if txn else None,
            ),
            post_commithook_properties=post_commit.NO_HOOKS,
        )
    except RsDeltaError as exc:
        raise DeltaOperationError(
            f"the replaceWhere write into {spec.root} failed in delta-rs: {exc}",
            fix="use SQL that DataFusion also knows in replaceWhere (comparisons, AND/OR, IN)",
        ) from None
    table = log.rs_table(spec.root)
    configuration = table.metadata().configuration
    post_commit.run(spec.root, configuration, table.version(), before or 0, lambda: table)


def _replace_own(
    table: DeltaTable, frame: DataFrame, spec: WriteSpec, where: str, txn: tuple[str, int] | None
) -> None:
    """The replaceWhere write lakefeed commits itself (the module doc), or its refusal."""
    rows = _table_rows(table, frame, spec.root)
    parameters = {"mode": "Overwrite", "partitionBy": "[]", "predicate": json.dumps([where])}
    marks = None if txn is None else (txn[0], txn[1], None)
    before = table.version()
    if dv_write.replace(table, spec.root, where, rows, parameters, marks) is None:
        if dv_write.applies(table, spec.root):
            unsupported(
                f"replaceWhere '{where}'",
                f"the table {spec.root} has writer features only lakefeed's own commits honour "
                "and lakefeed cannot evaluate this predicate on its rows (or replay its log); "
                "nothing was written",
                "use comparisons, AND/OR, IN and IS NULL on the table's columns",
            )
        features.check_writable(table, spec.root, "replaceWhere")  # refused: names the features
    configuration = table.metadata().configuration
    post_commit.run(spec.root, configuration, table.version(), before, lambda: table)


def _table_rows(table: DeltaTable, frame: DataFrame, root: str) -> pa.Table:
    """``frame``'s rows as the table's columns (by name, any case; a column it lacks is
    null); a column the table lacks is refused (the table's schema stays)."""
    schema = table_arrow_schema(table.schema())
    rows = frame.toArrow()
    by_lower = {name.lower(): name for name in rows.column_names}
    extra = sorted(set(by_lower) - {field.name.lower() for field in schema})
    if extra:
        raise DeltaOperationError(
            f"the replaceWhere write into {root} has columns the table lacks ({extra}); "
            "lakefeed adds columns in such a write only to tables delta-rs commits, not to "
            "this one (its writer features); nothing was written",
            fix="add the columns first (ALTER TABLE ... ADD COLUMNS), or write without them",
            code=UNSUPPORTED,
        )
    columns = [
        rows.column(by_lower[field.name.lower()]).cast(field.type)
        if field.name.lower() in by_lower
        else pa.nulls(rows.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _check_rows(frame: DataFrame, where: str, root: str) -> None:
    """Delta's check that every written row matches the predicate (a null counts as not)."""
    outside = frame.where(f"NOT coalesce(({where}), false)").limit(1).collect()
    if outside:
        raise DeltaError(
            f"data written into {root} does not match replaceWhere '{where}': "
            f"e.g. {outside[0].asDict()}",
            fix="write only rows matching the predicate (filter the DataFrame with it)",
            code=MISMATCH,
        )
