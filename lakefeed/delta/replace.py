"""Selective overwrites of a batch write: Delta's ``replaceWhere``, and the ones lakefeed refuses.

``df.write.format("delta").mode("overwrite").option("replaceWhere", pred)`` replaces only the
rows matching ``pred``, in one commit, after checking that every written row matches it
(``DELTA_REPLACE_WHERE_MISMATCH``; off with
``spark.databricks.delta.replaceWhere.constraintCheck.enabled=false``). Spark's file writer has
no row-level delete, so such a write goes to delta-rs (``write_deltalake(mode="overwrite",
predicate=...)``, which rewrites the matching files and adds the rows in one commit) with the
rows as Arrow on the driver, like a MERGE source: a replaceWhere write is a slice, not a table.

Before, these options were ignored and the write overwrote the whole table. Delta's other
selective overwrites (``replaceUsing``, ``replaceOn``, dynamic partition overwrites) are
refused with what to use instead: never a silent full overwrite.
"""

from __future__ import annotations

from collections.abc import Mapping

from deltalake import CommitProperties, Transaction, write_deltalake
from deltalake.exceptions import DeltaError as RsDeltaError
from pyspark.sql import DataFrame

from lakefeed.core import storage
from lakefeed.core.errors import DeltaError
from lakefeed.core.options import Options
from lakefeed.delta import features, generated, log, post_commit
from lakefeed.delta.commit import WriteSpec
from lakefeed.delta.errors import REPLACE_WHERE_MISMATCH as MISMATCH
from lakefeed.delta.errors import UNSUPPORTED, DeltaOperationError

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
    # delta-rs commits it: a table only lakefeed's own commits write is refused first
    features.check_writable(log.rs_table(spec.root), spec.root, "replaceWhere")
    frame = generated.apply(frame, spec.generated)
    _check_rows(frame, where, spec.root)
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
