"""Driver for the PostgreSQL sink's kill -9 test: Delta source -> PostgreSQL appends.

Run by tests/postgres/test_crash.py through tests/support/crash.py with ``WORK URL``. Appends
without keys, so a batch applied twice would show as duplicate ids. Run 1 kills itself right
after its first PostgreSQL commit, before Spark's commit log records the batch: the restart
must replay that batch as a no-op.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tests.support.crash import driver_session


def main(work: Path, url: str) -> None:
    from lakefeed.connectors import delta, postgres

    spark = driver_session("postgres-crash", work / "cp")
    target = postgres.PostgresTarget(url, "events")
    frame = delta.read_stream(spark, str(work / "src"), maxFilesPerTrigger="1")
    apply = postgres.foreach_batch(target, work / "cp")

    def write(batch, batch_id: int) -> None:  # noqa: ANN001 - a pyspark DataFrame
        apply(batch, batch_id)
        if os.environ.get("LAKEFEED_CRASH_RUN") == "1":
            os.killpg(os.getpgid(0), signal.SIGKILL)

    postgres.check_target(target, frame.columns)
    query = (
        frame.writeStream.foreachBatch(write)
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
