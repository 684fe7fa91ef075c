"""Driver for the exactly-once MERGE crash test: Delta source -> foreachBatch MERGE, availableNow.

Run by tests/connectors/delta/test_merge_crash.py through tests/support/crash.py. Each micro-batch
upserts its rows into the target with ``DeltaTable.merge(...).withTransaction(APP_ID, batch_id)``
and counts how often each key was applied (``n = t.n + 1``), so a batch applied twice shows. Before
Spark starts it records how far the target's txn and Spark's commit log each got (runs.jsonl); on
run 1 it kills itself right after the first MERGE commit, before Spark's commit log.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tests.support.crash import driver_session, record_progress, run_to_end

APP_ID = "merge-crash-upserts"


def main(work: Path) -> None:
    from lakefeed.compat.delta_spark import DeltaTable

    record_progress(work, APP_ID)
    die_after_commit = os.environ.get("LAKEFEED_CRASH_RUN") == "1"
    spark = driver_session("merge-crash", work / "cp")
    target = str(work / "dst")
    if not DeltaTable.isDeltaTable(spark, target):
        empty = spark.createDataFrame([], "id long, v string, n long")
        empty.write.format("delta").mode("ignore").save(target)

    def upsert(batch, batch_id: int) -> None:
        (
            DeltaTable.forPath(spark, target)
            .alias("t")
            .merge(batch.alias("s"), "t.id = s.id")
            .whenMatchedUpdate(set={"v": "s.v", "n": "t.n + 1"})
            .whenNotMatchedInsert(values={"id": "s.id", "v": "s.v", "n": "1"})
            .withTransaction(APP_ID, batch_id)
            .execute()
        )
        if die_after_commit:
            os.killpg(os.getpgid(0), signal.SIGKILL)

    query = (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", 1)
        .load(str(work / "src"))
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    run_to_end(spark, query)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
