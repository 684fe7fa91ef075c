"""Clickstream: page views per user → deduplicated clicks → per-user session metrics.

The clicks come from the built-in ``iot`` generator (seeded, no external system needed): each
generated event becomes a page view of user ``device_id``; its page and whether it is a purchase
follow from a hash of its event id.
A user is idle during some 5-minute blocks (again a hash), so sessions start and end.

bronze keeps the raw messages; silver parses them and drops the devices' re-sent duplicates with
``dropDuplicates(["event_id", "event_time"])`` under a watermark, as Spark's guide writes it;
gold groups each user's clicks into ``session_window``s (gap ``clickstream.sessionGap``) and
writes one row per session once the watermark closes it: length, pages, conversion.

Configuration (``lakefeed run ... --conf key=value``): ``clickstream.sessionGap`` (default
"2 minutes"), ``clickstream.watermark`` (default "1 minute"), ``clickstream.users`` (default
20), ``clickstream.totalRows`` (stop after that many generated clicks), ``clickstream.
rowsPerSecond`` (default 5), ``clickstream.backlogSeconds`` (default 1800: a first run starts
that far in the past), ``clickstream.startTime``, ``clickstream.seed``,
``clickstream.lateRate`` (share of clicks arriving later than the watermark allows).
"""

from pyspark.sql import functions as F

import lakefeed as lf
from lakefeed.connectors.generator.iot import PAYLOAD_DDL

PAGES = ["home", "search", "product", "product", "cart", "help"]
IDLE_BLOCK_SECONDS = 300  # a user is idle for whole 5-minute blocks


def generator_options() -> dict[str, str]:
    options = {
        "devices": lf.config("clickstream.users", "20"),
        "rowsPerSecond": lf.config("clickstream.rowsPerSecond", "5"),
        # a first triggered run finds the last half hour of clicks waiting
        "backlogSeconds": lf.config("clickstream.backlogSeconds", "1800"),
        "duplicateRate": "0.05",
        "malformedRate": "0",
    }
    for name in ("totalRows", "startTime", "seed", "lateRate"):
        value = lf.config(f"clickstream.{name}")
        if value is not None:
            options[name] = value
    return options


@lf.table(comment="raw generated page views with ingestion metadata")
def bronze_clicks():
    return lf.source("iot", **generator_options())


@lf.table(comment="one row per page view: user, page, purchase flag; duplicates dropped")
def silver_clicks():
    raw = lf.read_stream("bronze_clicks").select(F.from_json("value", PAYLOAD_DDL).alias("r"))
    block = F.floor(F.unix_timestamp("r.event_time") / IDLE_BLOCK_SECONDS)
    bucket = F.abs(F.hash("r.event_id")) % 100
    clicks = raw.where(F.abs(F.hash("r.device_id", block)) % 3 != 0).select(
        "r.event_id",
        F.col("r.device_id").alias("user_id"),
        "r.event_time",
        F.element_at(F.array(*map(F.lit, PAGES)), (bucket % len(PAGES)) + 1).alias("page"),
        (bucket < 4).alias("is_purchase"),
    )
    return clicks.withWatermark(
        "event_time", lf.config("clickstream.watermark", "1 minute")
    ).dropDuplicates(["event_id", "event_time"])


@lf.table(comment="one row per closed user session: length, pages, conversion")
def gold_sessions():
    gap = lf.config("clickstream.sessionGap", "2 minutes")
    clicks = lf.read_stream("silver_clicks").withWatermark(
        "event_time", lf.config("clickstream.watermark", "1 minute")
    )
    sessions = clicks.groupBy(F.session_window("event_time", gap).alias("session"), "user_id").agg(
        F.count("*").alias("clicks"),
        F.size(F.collect_set("page")).alias("distinct_pages"),
        F.max(F.col("is_purchase").cast("int")).cast("boolean").alias("converted"),
        F.sum(F.col("is_purchase").cast("int")).alias("purchases"),
    )
    return sessions.select(
        "user_id",
        F.col("session.start").alias("session_start"),
        F.col("session.end").alias("session_end"),
        (F.unix_timestamp("session.end") - F.unix_timestamp("session.start")).alias(
            "length_seconds"
        ),
        "clicks",
        "distinct_pages",
        "converted",
        "purchases",
    )
