"""Nexmark q0, q1, q2, q5 and q7 as lakefeed pipelines over the bronze Delta table of events.

Query definitions: nexmark/nexmark ``nexmark-flink/src/main/resources/queries/q{0,1,2,5,7}.sql``
(the ``bid`` view is ``event_type = 2`` of the event stream, watermark 4 s as in
``ddl_gen.sql``). Flink writes to a blackhole sink; lakefeed writes Delta tables, which is what
a lakefeed user gets. Where Flink SQL joins two results, the lakefeed pipeline chains two
streaming tables (a stream can only be aggregated once per query in append mode, and chaining
tables is how a lakefeed user writes it):

- q5 (hot items): ``nexmark_q5_counts`` = bids per auction per 10 s window sliding by 2 s;
  ``nexmark_q5`` = per window, the auctions whose count is the maximum (ties kept, as Flink's
  ``num >= maxn``);
- q7 (highest bid): ``nexmark_q7_max`` = the highest price per 10 s tumbling window;
  ``nexmark_q7`` = the bids at that price within the window (stream-stream join with
  watermarks, as Flink's ``JOIN ... WHERE dateTime BETWEEN window_end - 10 s AND window_end``).

Environment: ``NEXMARK_BRONZE`` (the events table), ``NEXMARK_QUERY`` (comma list of q0, q1,
q2, q5, q7: several share one run, for smoke tests),
``NEXMARK_MAX_FILES`` (files per micro-batch).
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import lakefeed as lf

WATERMARK = "4 seconds"
QUERIES = os.environ.get("NEXMARK_QUERY", "q0").split(",")


def bids() -> DataFrame:
    """The ``bid`` view of nexmark's ``ddl_views.sql`` over the bronze event stream."""
    events = lf.source(
        "delta",
        os.environ["NEXMARK_BRONZE"],
        maxFilesPerTrigger=os.environ.get("NEXMARK_MAX_FILES", "4"),
    )
    return events.where(F.col("event_type") == 2).select(
        F.col("bid_auction").alias("auction"),
        F.col("bid_bidder").alias("bidder"),
        F.col("bid_price").alias("price"),
        F.col("bid_channel").alias("channel"),
        F.col("bid_url").alias("url"),
        F.col("dateTime"),
        F.col("bid_extra").alias("extra"),
    )


if "q0" in QUERIES:

    @lf.table(comment="Nexmark q0: pass through")
    def nexmark_q0() -> DataFrame:
        return bids().select("auction", "bidder", "price", "dateTime", "extra")


if "q1" in QUERIES:

    @lf.table(comment="Nexmark q1: currency conversion")
    def nexmark_q1() -> DataFrame:
        price = (F.lit(0.908).cast("decimal(4,3)") * F.col("price")).cast("decimal(23,3)")
        return bids().select("auction", "bidder", price.alias("price"), "dateTime", "extra")


if "q2" in QUERIES:

    @lf.table(comment="Nexmark q2: selection")
    def nexmark_q2() -> DataFrame:
        return bids().where(F.col("auction") % 123 == 0).select("auction", "price")


if "q5" in QUERIES:

    @lf.table(comment="Nexmark q5, step 1: bids per auction per sliding window")
    def nexmark_q5_counts() -> DataFrame:
        hop = F.window("dateTime", "10 seconds", "2 seconds")
        return (
            bids()
            .withWatermark("dateTime", WATERMARK)
            .groupBy(hop.alias("w"), "auction")
            .count()
            .select(
                "auction",
                F.col("count").alias("num"),
                F.col("w.start").alias("starttime"),
                F.col("w.end").alias("endtime"),
            )
        )

    @lf.table(comment="Nexmark q5: the hottest auctions of each window")
    def nexmark_q5() -> DataFrame:
        per_window = (
            lf.read_stream("nexmark_q5_counts")
            .withWatermark("endtime", "10 seconds")
            .groupBy("starttime", "endtime")
            .agg(F.max("num").alias("maxn"), F.collect_list(F.struct("auction", "num")).alias("a"))
        )
        hot = per_window.select("maxn", F.explode("a").alias("a"))
        return hot.where(F.col("a.num") >= F.col("maxn")).select("a.auction", "a.num")


if "q7" in QUERIES:

    @lf.table(comment="Nexmark q7, step 1: the highest price per 10-second window")
    def nexmark_q7_max() -> DataFrame:
        return (
            bids()
            .withWatermark("dateTime", WATERMARK)
            .groupBy(F.window("dateTime", "10 seconds").alias("w"))
            .agg(F.max("price").alias("maxprice"))
            .select("maxprice", F.col("w.end").alias("window_end"))
        )

    @lf.table(comment="Nexmark q7: the bids at the highest price of their window")
    def nexmark_q7() -> DataFrame:
        b = bids().withWatermark("dateTime", WATERMARK).alias("b")
        m = lf.read_stream("nexmark_q7_max").withWatermark("window_end", "10 seconds").alias("m")
        joined = b.join(
            m,
            (F.col("b.price") == F.col("m.maxprice"))
            & (F.col("b.dateTime") >= F.col("m.window_end") - F.expr("INTERVAL 10 SECONDS"))
            & (F.col("b.dateTime") <= F.col("m.window_end")),
        )
        return joined.select("b.auction", "b.bidder", "b.price", "b.dateTime", "b.extra")
