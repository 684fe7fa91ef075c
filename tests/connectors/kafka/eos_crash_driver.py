"""Driver for the exactly-once Kafka sink's kill -9 test: Kafka → exactly-once Kafka sink with
availableNow and small batches.

Run as ``python eos_crash_driver.py BOOTSTRAP SOURCE TARGET CHECKPOINT``; killed and restarted
by ``tests.support.crash.run_with_kills``; exits 0 once everything available was copied.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.crash import driver_session


def main(bootstrap: str, source: str, target: str, checkpoint: str) -> None:
    spark = driver_session("kafka-eos-crash", Path(checkpoint))
    query = (
        spark.readStream.format("lakefeed_kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 250)
        .load()
        .selectExpr("key", "CAST(value AS STRING) AS value")
        .writeStream.format("lakefeed_kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("lakefeed.deliveryGuarantee", "exactly-once")
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
