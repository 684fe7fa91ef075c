"""Driver for the Delta exactly-once crash test: Delta source -> Delta sink, availableNow.

Run by tests/connectors/delta/test_crash.py through tests/support/crash.py. Before starting Spark it
records how far the Delta table and Spark's commit log each got (runs.jsonl), so the test can
prove a restart found the Delta commit of a batch ahead of Spark's commit log. On run 1 it adds
a hook to the sink's commit that SIGKILLs the driver right after a Delta commit.

``python crash_driver.py WORK [clustered]``: ``clustered`` streams into the existing clustered
table ``WORK/dst`` (tests/delta/test_clustered_writes.py), unpartitioned; else the sink creates
the table partitioned by ``k``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from tests.support.crash import driver_session, record_progress, run_to_end


def _query_id(work: Path) -> str | None:
    """The query's id: the Delta sink's txn app id (None before the first start)."""
    metadata = work / "cp" / "metadata"
    return json.loads(metadata.read_text())["id"] if metadata.exists() else None


def main(work: Path, clustered: bool = False) -> None:
    record_progress(work, _query_id(work))
    if os.environ.get("LAKEFEED_CRASH_RUN") == "1":
        from lakefeed.delta import commit

        # The sink commits in this process (foreachBatch): die with the JVM right after it.
        commit.AFTER_COMMIT.append(lambda _root, _batch: os.killpg(0, signal.SIGKILL))
    spark = driver_session("delta-crash", work / "cp")
    writer = (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", 1)
        .load(str(work / "src"))
        .selectExpr("id", "id % 2 as k", "payload")
        .writeStream.format("delta")
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
    )
    query = (writer if clustered else writer.partitionBy("k")).start(str(work / "dst"))
    run_to_end(spark, query)


if __name__ == "__main__":
    main(Path(sys.argv[1]), clustered=sys.argv[2:] == ["clustered"])
