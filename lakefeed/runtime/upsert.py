"""Update mode into Delta: each micro-batch MERGEd on the table's keys, exactly once.

Spark's update mode emits, per batch, the rows that changed (an aggregate's updated groups);
no plain Delta sink can apply them. A ``foreachBatch`` MERGE can: matched keys are updated,
new keys inserted, and the batch carries the flow's Delta ``txn`` (app id = the query id, version
= the batch id) in the same commit, so a batch Spark replays after a crash changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from lakefeed.spark import offset_log


@dataclass
class KeyedUpsert:
    """``foreachBatch`` body: MERGE the batch into ``target`` on ``keys``."""

    target: str
    keys: list[str]
    checkpoint: str

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        from lakefeed.compat.delta_spark import DeltaTable

        app_id = offset_log.running_query_id(self.checkpoint)
        condition = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in self.keys)
        (
            DeltaTable.forPath(batch.sparkSession, self.target)
            .alias("t")
            .merge(batch.alias("s"), condition)
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .withTransaction(app_id, batch_id, offset_log.fingerprint(self.checkpoint, batch_id))
            .execute()
        )
