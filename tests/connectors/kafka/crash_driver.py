"""Driver for the kill -9 test: Kafka → Delta with availableNow, small batches.

Run as ``python crash_driver.py BOOTSTRAP TOPIC TABLE CHECKPOINT``; killed and restarted by
``tests.support.crash.run_with_kills``; exits 0 once everything available was written.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.crash import driver_session


def main(bootstrap: str, topic: str, table: str, checkpoint: str) -> None:
    spark = driver_session("kafka-crash", Path(checkpoint))
    query = (
        spark.readStream.format("lakefeed_kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 1500)
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
        .writeStream.format("delta")
        .option("path", table)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
