"""Driver for the Delta exactly-once crash test: Delta source -> Delta sink, availableNow.

Run by tests/connectors/delta/test_crash.py through tests/support/crash.py. Before starting Spark it
records how far the Delta table and Spark's commit log each got (runs.jsonl), so the test can
prove a restart found the Delta commit of a batch ahead of Spark's commit log. On run 1 it adds
a hook to the sink's commit that SIGKILLs the driver right after a Delta commit.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from tests.support.crash import driver_session


def _progress(work: Path) -> dict:
    from deltalake import DeltaTable

    from lakefeed.delta import log

    query_id = None
    if (work / "cp" / "metadata").exists():
        query_id = json.loads((work / "cp" / "metadata").read_text())["id"]
    delta_txn = None
    if query_id and log.is_delta_table(str(work / "dst")):
        delta_txn = DeltaTable(str(work / "dst")).transaction_version(query_id)
    commits = work / "cp" / "commits"
    spark_done = (
        [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.exists() else []
    )
    return {
        "run": os.environ.get("LAKEFEED_CRASH_RUN"),
        "delta_txn": delta_txn,
        "spark_commit": max(spark_done) if spark_done else None,
    }


def main(work: Path) -> None:
    with (work / "runs.jsonl").open("a") as out:
        out.write(json.dumps(_progress(work)) + "\n")
    if os.environ.get("LAKEFEED_CRASH_RUN") == "1":
        from lakefeed.delta import commit

        # The sink commits in this process (foreachBatch): die with the JVM right after it.
        commit.AFTER_COMMIT.append(lambda _root, _batch: os.killpg(0, signal.SIGKILL))
    spark = driver_session("delta-crash", work / "cp")
    query = (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", 1)
        .load(str(work / "src"))
        .selectExpr("id", "id % 2 as k", "payload")
        .writeStream.format("delta")
        .option("checkpointLocation", str(work / "cp"))
        .partitionBy("k")
        .trigger(availableNow=True)
        .start(str(work / "dst"))
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
