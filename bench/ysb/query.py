"""The YSB query in Spark, shared by the lakefeed pipeline and the plain PySpark job.

Both Spark implementations run this exact plan, so a difference between them measures sources,
sinks and runtime, not query writing skill.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

EVENT_FIELDS = ("user_id", "page_id", "ad_id", "ad_type", "event_type", "event_time", "ip_address")
EVENT_SCHEMA = StructType([StructField(name, StringType()) for name in EVENT_FIELDS])
WATERMARK_DELAY = "10 seconds"


def campaigns_frame(spark: SparkSession, path: str) -> DataFrame:
    """The static ad → campaign table (yahoo keeps it in Redis)."""
    schema = "ad_id STRING, campaign_id STRING"
    return spark.read.schema(schema).json(path)


def parse_value(value: Column) -> list[Column]:
    """Columns of a JSON event held in a string column (the Kafka ``value``), parsed once.

    ``from_json(...)[field]`` per column (or ``from_json(...).alias("e")`` then ``e.*``) is
    parsed several times per row: the optimizer pushes the ``event_type`` filter and the join's
    inferred ``isnotnull(ad_id)`` below the projection, substituting ``from_json`` into each,
    and prunes each copy to its field — four parses per view row in the latency query (three
    with the struct). A generator is a barrier to that substitution: ``inline(array(struct))``
    yields the struct's fields as columns from one parse, and the filters apply to its output.
    """
    parsed = F.from_json(value.cast("string"), EVENT_SCHEMA)
    return [F.inline(F.array(parsed))]


def views(events: DataFrame, campaigns: DataFrame) -> DataFrame:
    """Filter, project and join: the view events with their campaign, in event time."""
    return (
        events.where(F.col("event_type") == "view")
        .select("ad_id", F.timestamp_millis(F.col("event_time").cast("long")).alias("event_time"))
        .join(F.broadcast(campaigns), "ad_id")
    )


def window_counts(events: DataFrame, campaigns: DataFrame) -> DataFrame:
    """Views per campaign per 10-second event-time window (yahoo's ``seen_count``)."""
    watermarked = views(events, campaigns).withWatermark("event_time", WATERMARK_DELAY)
    return (
        watermarked.groupBy(F.window("event_time", "10 seconds").alias("w"), "campaign_id")
        .count()
        .select("campaign_id", F.col("w.start").alias("window_start"), "count")
    )
