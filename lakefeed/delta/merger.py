"""MERGE into a Delta table: one delta-rs merge, one Delta commit, exactly once with a ``txn``.

The source is Arrow on the driver (a micro-batch or a change set, rarely a whole table); it may
be given as a function producing it, so a change whose ``txn`` the table holds already collects
nothing. Conditions and values are SQL text (DataFusion's) naming the target and the source by
their aliases. Clauses of one kind run in order, the first whose condition holds wins; a target
row matched by several source rows fails the MERGE when an update or delete clause applies
(:class:`~lakefeed.delta.errors.MergeMultipleMatchesError`).

    from lakefeed.delta import merger
    merger.merge(root, batch, "t.id <=> s.id",
                [merger.Clause(merger.MATCHED_UPDATE_ALL), merger.Clause(merger.INSERT_ALL)],
                source_alias="s", target_alias="t", txn=Txn(query_id, batch_id))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import pyarrow as pa
from deltalake import DeltaTable

from lakefeed.delta import dv_merge, identity, operations
from lakefeed.delta.clauses import (
    BY_SOURCE_DELETE,
    BY_SOURCE_UPDATE,
    INSERT,
    INSERT_ALL,
    MATCHED_DELETE,
    MATCHED_UPDATE,
    MATCHED_UPDATE_ALL,
    Clause,
)
from lakefeed.delta.errors import DeltaOperationError
from lakefeed.delta.operations import Txn, change

__all__ = [
    "BY_SOURCE_DELETE",
    "BY_SOURCE_UPDATE",
    "DEFAULT_SOURCE_ALIAS",
    "DEFAULT_TARGET_ALIAS",
    "INSERT",
    "INSERT_ALL",
    "MATCHED_DELETE",
    "MATCHED_UPDATE",
    "MATCHED_UPDATE_ALL",
    "Clause",
    "Source",
    "merge",
]

DEFAULT_TARGET_ALIAS = "target"
DEFAULT_SOURCE_ALIAS = "source"

Source: TypeAlias = pa.Table | Callable[[], pa.Table]
"""The source rows, or a function collecting them (called only when the MERGE runs)."""


def merge(
    root: str,
    source: Source,
    predicate: str,
    clauses: Sequence[Clause],
    *,
    source_alias: str = DEFAULT_SOURCE_ALIAS,
    target_alias: str = DEFAULT_TARGET_ALIAS,
    merge_schema: bool = False,
    txn: Txn | None = None,
) -> dict[str, Any] | None:
    """MERGE ``source`` into the table at ``root`` on ``predicate`` (see the module doc):
    with deletion vectors where the table enables them (:mod:`.dv_merge`), else delta-rs's
    copy-on-write MERGE; the metrics (delta-rs's names), or None when ``txn`` is already
    committed."""
    if not clauses:
        raise DeltaOperationError(
            "a MERGE needs at least one whenMatched/whenNotMatched clause",
            fix="add e.g. .whenMatchedUpdateAll().whenNotMatchedInsertAll()",
        )

    def run(table: DeltaTable, commit: dict[str, Any]) -> dict[str, Any]:
        rows = source if isinstance(source, pa.Table) else source()
        identity.check_merge(identity.of_schema(table.schema()), clauses, rows.column_names, root)
        sides = dv_merge.Sides(target_alias, source_alias)
        marks = operations.own_marks(txn)
        if not merge_schema:
            marked = dv_merge.merge(table, root, rows, predicate, clauses, sides, marks)
            if marked is not None:
                return marked
        operations.rs_fallback(table, root, "MERGE")
        merger = table.merge(
            rows,
            predicate,
            source_alias=source_alias,
            target_alias=target_alias,
            merge_schema=merge_schema,
            **commit,
        )
        for clause in clauses:
            merger = clause.add_to(merger)
        return dict(merger.execute())

    return change(root, "MERGE", run, txn)
