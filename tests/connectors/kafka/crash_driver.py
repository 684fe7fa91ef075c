"""Driver for the Kafka kill -9 tests: a Kafka topic, in small availableNow batches, into a
Delta table (``delta``) or through the exactly-once Kafka sink into another topic (``kafka``).

Run as ``python crash_driver.py BOOTSTRAP TOPIC TARGET CHECKPOINT [delta|kafka]`` (TARGET: the
table's path, or the target topic); killed and restarted by
``tests.support.crash.run_with_kills``; exits 0 once everything available was written.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.crash import driver_session, run_to_end

BATCH_OFFSETS = {"delta": 1500, "kafka": 250}  # maxOffsetsPerTrigger per sink
APP_NAMES = {"delta": "kafka-crash", "kafka": "kafka-eos-crash"}


def main(bootstrap: str, topic: str, target: str, checkpoint: str, sink: str = "delta") -> None:
    spark = driver_session(APP_NAMES[sink], Path(checkpoint))
    rows = (
        spark.readStream.format("lakefeed_kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", BATCH_OFFSETS[sink])
        .load()
    )
    if sink == "delta":
        writer = (
            rows.selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
            .writeStream.format("delta")
            .option("path", target)
        )
    else:
        writer = (
            rows.selectExpr("key", "CAST(value AS STRING) AS value")
            .writeStream.format("lakefeed_kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", target)
            .option("lakefeed.deliveryGuarantee", "exactly-once")
        )
    query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    run_to_end(spark, query)


if __name__ == "__main__":
    main(*sys.argv[1:6])
