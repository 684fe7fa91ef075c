"""Kafka ingestion: JSON messages on a topic → bronze Delta table → parsed, validated silver.

bronze keeps every Kafka record as it arrived (key, value, topic, partition, offset, timestamp):
offsets live in the flow's checkpoint and the Delta sink commits each micro-batch once, so a
crash or restart never duplicates or loses a message. silver parses the JSON value, drops what
does not validate into ``silver_readings_quarantine`` (with the failed rules), and removes
duplicate events re-sent by devices.

Configuration (``lakefeed run ... --conf key=value``): ``kafka.bootstrap`` (default
127.0.0.1:9092), ``kafka.topic`` (default iot-readings), ``kafka.startingOffsets`` (default
earliest), ``kafka.maxOffsetsPerTrigger`` (default 50000). See README.md to run it end to end.
"""

from pyspark.sql import functions as F

import lakefeed as lf
from lakefeed.connectors.generator.iot import PAYLOAD_DDL


@lf.table(comment="raw Kafka records, exactly once per offset")
def bronze_kafka():
    records = lf.read_kafka(
        lf.config("kafka.topic") or "iot-readings",
        bootstrap_servers=lf.config("kafka.bootstrap") or "127.0.0.1:9092",
        startingOffsets=lf.config("kafka.startingOffsets") or "earliest",
        maxOffsetsPerTrigger=lf.config("kafka.maxOffsetsPerTrigger") or 50_000,
    )
    return records.select(
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_time"),
    )


# Silver keeps no Kafka offset: a re-sent duplicate differs from its original only there (same
# payload, same device key, so the same partition), and without it the row dedup keeps is the
# same in stream and batch (``lakefeed verify``). bronze_kafka keeps every offset.
@lf.table(comment="parsed, validated and deduplicated readings")
@lf.expect_or_drop("valid_json", "event_id IS NOT NULL")
@lf.expect_or_drop("has_device", "device_id IS NOT NULL AND device_id <> ''")
@lf.expect_or_drop("temp_in_range", "temperature BETWEEN -60 AND 150")
@lf.expect("battery_ok", "battery >= 10")  # a percentage: warn on a low battery
def silver_readings():
    parsed = lf.read_stream("bronze_kafka").select(
        F.from_json("value", PAYLOAD_DDL).alias("r"), "partition", "kafka_time"
    )
    return (
        parsed.select(
            "r.event_id",
            "r.device_id",
            # Unparsable rows have no event time; the Kafka timestamp lets the watermark
            # expire them (valid_json drops them anyway).
            F.coalesce("r.event_time", "kafka_time").alias("event_time"),
            "r.temperature",
            "r.humidity",
            "r.battery",
            "partition",
        )
        .withWatermark("event_time", "10 minutes")
        .dropDuplicatesWithinWatermark(["event_id"])
    )
