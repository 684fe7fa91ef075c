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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.table import TableMerger

from lakefeed.delta.errors import DeltaOperationError
from lakefeed.delta.operations import Txn, change

MATCHED_UPDATE = "when_matched_update"
MATCHED_UPDATE_ALL = "when_matched_update_all"
MATCHED_DELETE = "when_matched_delete"
INSERT = "when_not_matched_insert"
INSERT_ALL = "when_not_matched_insert_all"
BY_SOURCE_UPDATE = "when_not_matched_by_source_update"
BY_SOURCE_DELETE = "when_not_matched_by_source_delete"
_WITH_VALUES = frozenset({MATCHED_UPDATE, INSERT, BY_SOURCE_UPDATE})

DEFAULT_TARGET_ALIAS = "target"
DEFAULT_SOURCE_ALIAS = "source"

Source: TypeAlias = pa.Table | Callable[[], pa.Table]
"""The source rows, or a function collecting them (called only when the MERGE runs)."""


@dataclass(frozen=True)
class Clause:
    """One ``WHEN`` clause: its kind (delta-rs's merger method), an optional condition, and the
    column -> SQL values of an update or insert (``*_ALL`` kinds take the source's columns)."""

    kind: str
    predicate: str | None = None
    values: Mapping[str, str] | None = None

    def add_to(self, merger: TableMerger) -> TableMerger:
        if self.kind in _WITH_VALUES:
            return getattr(merger, self.kind)(
                updates=dict(self.values or {}), predicate=self.predicate
            )
        return getattr(merger, self.kind)(predicate=self.predicate)


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
    """MERGE ``source`` into the table at ``root`` on ``predicate`` (see the module doc);
    delta-rs's metrics, or None when ``txn`` is already committed."""
    if not clauses:
        raise DeltaOperationError(
            "a MERGE needs at least one whenMatched/whenNotMatched clause",
            fix="add e.g. .whenMatchedUpdateAll().whenNotMatchedInsertAll()",
        )

    def run(table: DeltaTable, commit: dict[str, Any]) -> dict[str, Any]:
        merger = table.merge(
            source if isinstance(source, pa.Table) else source(),
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
