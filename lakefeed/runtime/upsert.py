"""Update mode into Delta: each micro-batch MERGEd on the table's keys, exactly once.

Spark's update mode emits, per batch, the rows that changed (an aggregate's updated groups);
no plain Delta sink can apply them. A ``foreachBatch`` MERGE can: matched keys are updated,
new keys inserted, and the batch carries the flow's Delta ``txn`` (app id = the query id, version
= the batch id) in the same commit, so a batch Spark replays after a crash changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from lakefeed.delta import merger
from lakefeed.delta.operations import Txn
from lakefeed.spark import offset_log

_UPSERT = (merger.Clause(merger.MATCHED_UPDATE_ALL), merger.Clause(merger.INSERT_ALL))


@dataclass
class KeyedUpsert:
    """``foreachBatch`` body: MERGE the batch into ``target`` on ``keys``."""

    target: str
    keys: list[str]
    checkpoint: str

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        app_id = offset_log.running_query_id(self.checkpoint)
        condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in self.keys)
        offsets = offset_log.fingerprint(self.checkpoint, batch_id)
        merger.merge(
            self.target,
            batch.toArrow,  # collected only when the batch is not committed yet
            condition,
            _UPSERT,
            source_alias="s",
            target_alias="t",
            txn=Txn(app_id, batch_id, offsets),
        )
