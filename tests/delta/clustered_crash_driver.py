"""Driver for the clustered-table crash test: a Delta source streamed into an existing clustered
Delta table (writer features lakefeed commits itself), availableNow. As
tests/connectors/delta/crash_driver.py, without partitioning (a clustered table has none)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tests.connectors.delta.crash_driver import _query_id
from tests.support.crash import driver_session, record_progress, run_to_end


def main(work: Path) -> None:
    record_progress(work, _query_id(work))
    if os.environ.get("LAKEFEED_CRASH_RUN") == "1":
        from lakefeed.delta import commit

        commit.AFTER_COMMIT.append(lambda _root, _batch: os.killpg(0, signal.SIGKILL))
    spark = driver_session("clustered-crash", work / "cp")
    query = (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", 1)
        .load(str(work / "src"))
        .selectExpr("id", "id % 2 as k", "payload")
        .writeStream.format("delta")
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
        .start(str(work / "dst"))
    )
    run_to_end(spark, query)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
