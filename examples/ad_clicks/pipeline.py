"""Ad impressions ↔ clicks: a stream–stream join with watermarks and a time bound.

Both streams come from the built-in ``iot`` generator (seeded, no external system needed), run
twice with the same seed: each generated event is an impression of ad ``device_id``; the second
run, started ``adclicks.clickDelay`` later, replays the same events as clicks, of which a hash
keeps ``adclicks.clickRate`` percent. A click happens between 0 and ``clickDelay`` seconds after
its impression (a hash again) and arrives after it, as a click log would. ``impressions`` and
``clicks`` parse the generated messages (a real pipeline would keep raw bronze tables first:
see ``examples/iot``).

gold joins each impression to its click when the click comes within ``adclicks.clickWindow``
(a *time bound*: without it Spark would keep every impression in state for ever). It is a
``leftOuter`` join: an impression never clicked is written too, with no click, once the
watermark passes ``impression_time + clickWindow`` — then no click can match it any more.
``expires_at`` says when that is; an impression that is still waiting is in the join's state,
not in the table (``lakefeed state gold_ad_clicks`` shows it).

Configuration (``lakefeed run ... --conf key=value``): ``adclicks.ads`` (default 10),
``adclicks.rowsPerSecond`` (default 5), ``adclicks.totalRows``, ``adclicks.startTime``,
``adclicks.backlogSeconds`` (default 600), ``adclicks.seed``, ``adclicks.clickRate`` (percent,
default 20), ``adclicks.clickDelay`` (seconds, default 30), ``adclicks.clickWindow`` (default
"2 minutes"), ``adclicks.watermark`` (default "1 minute"), ``adclicks.maxRowsPerTrigger``.
"""

from datetime import UTC, datetime, timedelta

from pyspark.sql import functions as F

import lakefeed as lf
from lakefeed.connectors.generator.iot import PAYLOAD_DDL


def generator_options(delay_seconds: int = 0) -> dict[str, str]:
    """The impressions' generator; with a delay, the clicks' (the same events, later)."""
    options = {
        "devices": lf.config("adclicks.ads", "10"),
        "rowsPerSecond": lf.config("adclicks.rowsPerSecond", "5"),
        "seed": lf.config("adclicks.seed", "0"),
        "lateRate": "0",
        "duplicateRate": "0",
        "malformedRate": "0",
    }
    for name in ("totalRows", "maxRowsPerTrigger"):
        value = lf.config(f"adclicks.{name}")
        if value is not None:
            options[name] = value
    start = lf.config("adclicks.startTime")
    if start is not None:
        at = datetime.fromisoformat(start.replace("Z", "+00:00")).astimezone(UTC)
        options["startTime"] = (at + timedelta(seconds=delay_seconds)).isoformat()
    else:  # the clicks' backlog starts later by the delay
        backlog = int(lf.config("adclicks.backlogSeconds", "600")) - delay_seconds
        options["backlogSeconds"] = str(max(backlog, 0))
    return options


def click_delay() -> int:
    return int(lf.config("adclicks.clickDelay", "30"))


def read_options() -> dict[str, str]:
    """How many files of each input table a gold batch reads (default: all that wait)."""
    files = lf.config("adclicks.maxFilesPerTrigger")
    return {"maxFilesPerTrigger": files} if files else {}


def watermark() -> str:
    return lf.config("adclicks.watermark", "1 minute")


@lf.table(comment="one row per impression: id, ad, time")
def impressions():
    raw = lf.source("iot", **generator_options()).select(
        F.from_json("value", PAYLOAD_DDL).alias("r")
    )
    return raw.select(
        F.col("r.event_id").alias("impression_id"),
        F.col("r.device_id").alias("ad_id"),
        F.col("r.event_time").alias("impression_time"),
    )


@lf.table(comment="one row per click: the impression clicked and when")
def clicks():
    generated = lf.source("iot", **generator_options(click_delay()))
    raw = generated.select(F.from_json("value", PAYLOAD_DDL).alias("r"))
    rate = int(lf.config("adclicks.clickRate", "20"))
    # The generator's event time here is the impression's plus clickDelay: pull the click
    # back by a hash-chosen 0..clickDelay seconds, so it lands after the impression.
    back = F.abs(F.hash("r.event_id", F.lit("delay"))) % (click_delay() * 1000 + 1)
    clicked = F.abs(F.hash("r.event_id", F.lit("click"))) % 100 < rate
    return raw.where(clicked).select(
        F.col("r.event_id").alias("click_impression_id"),
        F.col("r.device_id").alias("click_ad_id"),
        (F.col("r.event_time") - F.make_interval(secs=back / 1000)).alias("click_time"),
    )


@lf.table(comment="impressions with their click (or none, once none can come)")
def gold_ad_clicks():
    bound = lf.config("adclicks.clickWindow", "2 minutes")
    impressions = lf.read_stream("impressions", **read_options()).withWatermark(
        "impression_time", watermark()
    )
    clicks = lf.read_stream("clicks", **read_options()).withWatermark("click_time", watermark())
    joined = impressions.join(
        clicks,
        F.expr(
            "click_impression_id = impression_id AND click_ad_id = ad_id AND "
            f"click_time >= impression_time AND click_time <= impression_time + interval {bound}"
        ),
        "leftOuter",
    )
    return joined.select(
        "impression_id",
        "ad_id",
        "impression_time",
        "click_time",
        F.col("click_time").isNotNull().alias("clicked"),
        (F.col("impression_time") + F.expr(f"interval {bound}")).alias("expires_at"),
    )
