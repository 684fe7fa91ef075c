"""IoT telemetry: raw device messages → validated readings → 5-minute device aggregates.

bronze keeps every raw message with its ingestion metadata (nothing is lost, replays are
possible); silver parses the JSON payload, validates it (bad rows go to
``silver_readings_quarantine`` with the rules they failed) and drops duplicates re-sent by the
devices; gold aggregates readings per device in 5-minute event-time windows, each window written
once when the watermark closes it.

The generator starts ``iot.backlogSeconds`` (default 600) before the first run, so a first
``--mode available-now`` or ``once`` run finds ten minutes of readings waiting (and gold gets
its first closed windows), as a triggered pipeline over a real source would; a continuous run
catches up on that backlog and then follows the clock. Late readings (``iot.lateRate``, 0 by
default) arrive after silver's watermark has passed them: the stream drops them, as it should,
and a batch recompute cannot know which, so ``lakefeed verify`` counts them as differences.
``lakefeed status`` shows how many each flow dropped; with ``iot.lateRows=keep`` silver keeps
them in ``silver_readings_late`` instead (``@lf.table(late_rows="keep")``).

Configuration (``lakefeed run ... --conf key=value``): ``iot.rowsPerSecond``, ``iot.devices``,
``iot.totalRows`` (stop the generator after that many rows), ``iot.startTime``,
``iot.backlogSeconds``, ``iot.seed``, ``iot.lateRate``, ``iot.duplicateRate``,
``iot.malformedRate``, ``iot.maxRowsPerTrigger``; ``iot.lateRows`` (drop or keep) and
``iot.silverMaxFilesPerTrigger`` (how many bronze files a silver batch reads: a triggered run
then replays the backlog in batches, as a continuous run meets it, so late rows show).
"""

from pyspark.sql import functions as F

import lakefeed as lf
from lakefeed.connectors.generator.iot import PAYLOAD_DDL

GENERATOR_OPTIONS = (
    "rowsPerSecond",
    "devices",
    "totalRows",
    "startTime",
    "backlogSeconds",
    "seed",
    "lateRate",
    "maxLateSeconds",
    "duplicateRate",
    "malformedRate",
    "maxRowsPerTrigger",
)


def bronze_read_options() -> dict[str, str]:
    files = lf.config("iot.silverMaxFilesPerTrigger")
    return {"maxFilesPerTrigger": files} if files else {}


def generator_options() -> dict[str, str]:
    options = {"rowsPerSecond": "500", "devices": "50", "backlogSeconds": "600", "lateRate": "0"}
    for name in GENERATOR_OPTIONS:
        value = lf.config(f"iot.{name}")
        if value is not None:
            options[name] = value
    return options


@lf.table(comment="raw device messages with ingestion metadata", partition_cols=["date"])
def bronze_readings():
    return (
        lf.source("iot", **generator_options())
        .withColumn("date", F.to_date("ingest_time"))
        .withColumn("source", F.lit("lakefeed_iot"))
    )


# Silver holds only payload fields: a re-sent duplicate differs from its original in offset and
# ingest_time alone, so without them the row kept by dedup is the same in stream and batch.
@lf.table(
    comment="parsed, validated and deduplicated readings",
    late_rows=lf.config("iot.lateRows") or "drop",
)
@lf.expect_or_drop("valid_json", "event_id IS NOT NULL")
@lf.expect_or_drop("has_device", "device_id IS NOT NULL AND device_id <> ''")
@lf.expect_or_drop("temp_in_range", "temperature BETWEEN -60 AND 150")
@lf.expect("battery_ok", "battery >= 10")  # a percentage: warn on a low battery
def silver_readings():
    parsed = lf.read_stream("bronze_readings", **bronze_read_options()).select(
        F.from_json("value", PAYLOAD_DDL).alias("r"), "offset", "ingest_time", "value"
    )
    return (
        parsed.select(
            "r.event_id",
            "r.device_id",
            # Unparsable rows have no event time; give them their arrival time so the
            # watermark can still expire them (valid_json drops them anyway).
            F.coalesce("r.event_time", "ingest_time").alias("event_time"),
            "r.temperature",
            "r.humidity",
            "r.battery",
            # The raw text of an unparsable message, so its quarantine row shows what came in.
            F.when(F.col("r.event_id").isNull(), F.col("value")).alias("raw_payload"),
            # Unparsable rows share a NULL event_id: key them by offset so dedup keeps each
            # one for the quarantine instead of folding them together.
            F.coalesce("r.event_id", F.concat(F.lit("offset:"), "offset")).alias("dedup_key"),
        )
        .withWatermark("event_time", "2 minutes")
        .dropDuplicatesWithinWatermark(["dedup_key"])
        .drop("dedup_key")
    )


@lf.table(comment="per-device 5-minute aggregates, one row per closed window")
def gold_device_5min():
    return (
        lf.read_stream("silver_readings")
        .withWatermark("event_time", "2 minutes")
        .groupBy(F.window("event_time", "5 minutes"), "device_id")
        .agg(
            F.count(F.lit(1)).alias("readings"),
            F.avg("temperature").alias("avg_temp"),
            F.max("temperature").alias("max_temp"),
            F.min("battery").alias("min_battery"),
        )
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "device_id",
            "readings",
            "avg_temp",
            "max_temp",
            "min_battery",
        )
    )
