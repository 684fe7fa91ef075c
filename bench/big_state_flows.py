"""The pipeline of ``bench.big_state``: one stateful table per run, chosen by configuration.

``bigstate.workload`` picks it and ``bigstate.landing`` names the folder of Parquet files the
bench writes (one file per micro-batch: ``cloudFiles.maxFilesPerTrigger=1``):

- ``dedup``: ``dropDuplicatesWithinWatermark(["id"])`` with a one-day watermark over event times
  that advance a second per batch, so no id expires during the run: the state holds every
  distinct id seen (``bigstate.dedup=keys``: ``dropDuplicates(["id"])``, whose ids never expire,
  so no batch looks for expired ones: the comparison that prices that search;
  ``bigstate.dedup=ttl``: :func:`lakefeed.drop_duplicates_within_ttl` with a one-day TTL,
  whose eviction sweeps a bucket of keys at a time, not the whole state each batch);
- ``sessions``: session windows per user with a gap longer than the event time the run spans,
  so every user's session stays open: the state holds one session per user seen.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import lakefeed as lf

WORKLOAD = lf.config("bigstate.workload", "dedup")
LANDING = lf.config("bigstate.landing", "landing")
DEDUP = lf.config("bigstate.dedup", "within-watermark")
SESSION_GAP = "1 hour"


def _landed(schema: str) -> DataFrame:
    files = lf.read_files(LANDING, "parquet", schema=schema, **{"cloudFiles.maxFilesPerTrigger": 1})
    return files.drop("_metadata")


if WORKLOAD == "dedup":

    @lf.table(comment="first sighting of each id")
    def unique_ids() -> DataFrame:
        landed = _landed("id BIGINT, ts TIMESTAMP")
        if DEDUP == "ttl":  # processing-time TTL: no watermark
            return lf.drop_duplicates_within_ttl(landed, ["id"], "1 day")
        events = landed.withWatermark("ts", "1 day")
        if DEDUP == "keys":
            return events.dropDuplicates(["id"])
        return events.dropDuplicatesWithinWatermark(["id"])

else:

    @lf.table(comment="closed sessions per user")
    def user_sessions() -> DataFrame:
        events = _landed("user BIGINT, ts TIMESTAMP").withWatermark("ts", "1 minute")
        sessions = events.groupBy(F.session_window("ts", SESSION_GAP), "user")
        return sessions.agg(F.count("*").alias("events"))
