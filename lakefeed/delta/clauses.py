"""A MERGE's ``WHEN`` clauses: their kinds (delta-rs's ``TableMerger`` method names), shared
by delta-rs's MERGE (:mod:`.merger`) and the one writing deletion vectors (:mod:`.dv_merge`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from deltalake.table import TableMerger

MATCHED_UPDATE = "when_matched_update"
MATCHED_UPDATE_ALL = "when_matched_update_all"
MATCHED_DELETE = "when_matched_delete"
INSERT = "when_not_matched_insert"
INSERT_ALL = "when_not_matched_insert_all"
BY_SOURCE_UPDATE = "when_not_matched_by_source_update"
BY_SOURCE_DELETE = "when_not_matched_by_source_delete"
WITH_VALUES = frozenset({MATCHED_UPDATE, INSERT, BY_SOURCE_UPDATE})

MATCHED = frozenset({MATCHED_UPDATE, MATCHED_UPDATE_ALL, MATCHED_DELETE})
NOT_MATCHED = frozenset({INSERT, INSERT_ALL})
BY_SOURCE = frozenset({BY_SOURCE_UPDATE, BY_SOURCE_DELETE})
DELETES = frozenset({MATCHED_DELETE, BY_SOURCE_DELETE})


@dataclass(frozen=True)
class Clause:
    """One ``WHEN`` clause: its kind (delta-rs's merger method), an optional condition, and the
    column -> SQL values of an update or insert (``*_ALL`` kinds take the source's columns)."""

    kind: str
    predicate: str | None = None
    values: Mapping[str, str] | None = None

    def add_to(self, merger: TableMerger) -> TableMerger:
        if self.kind in WITH_VALUES:
            return getattr(merger, self.kind)(
                updates=dict(self.values or {}), predicate=self.predicate
            )
        return getattr(merger, self.kind)(predicate=self.predicate)
