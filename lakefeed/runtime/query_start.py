"""Spark settings a flow's query reads once, when it starts: set on the session for that start.

Spark's ``StreamExecution`` clones the session, settings included, when ``start()`` constructs
it (``sparkSessionForStream``), and the offset log pins some settings for the checkpoint's life
from the first batch on. So the runner sets a flow's own settings on the shared session around
that flow's ``start()`` only, and restores the session's values afterwards (:func:`starting`):

- **the flow's ``spark_conf``** (DLT's and SDP's per-table and per-flow Spark settings), also
  set while its function is evaluated and while its batches (a materialized view's refresh, a
  ``once`` backfill) run (:func:`flow_conf`), so analysis and execution both see them.

- **processing-time timers in a triggered run.** Spark runs a no-data micro-batch on every
  trigger for a query whose ``transformWithState`` works in processing-time mode (its timers
  could be due at any wall-clock moment, as with ``flatMapGroupsWithState``'s processing-time
  timeout). Under ``trigger(availableNow=True)`` that query never ends: each batch asks for
  another. Such a flow starts, in the triggered modes only, with
  ``spark.sql.streaming.noDataMicroBatches.enabled=false``: due timers fire in the next batch
  that has data, which is what Spark promises for processing-time timers. Continuous runs keep
  the no-data batches.
- **lakefeed's TTL dedup** (:func:`lakefeed.drop_duplicates_within_ttl`) keeps its state in
  Spark's Avro state encoding (``spark.sql.streaming.stateStore.encodingFormat=avro``): a key's
  row, (bucket, key columns) → first seen, takes 18 + 10 bytes there against 72 + 17 as
  UnsafeRows (each part a row nesting a struct, 32 bytes for one integer; Spark's own dedup
  stores 17 + 17), and RocksDB's memtables and block cache hold those bytes per key: half the
  state memory for the same keys (docs/benchmarks.md, "Big state, round 4"). Spark refuses
  Avro for its other stateful operators, so a flow gets it only when every stateful operator of
  its plan is that dedup; the offset log pins the encoding, so a checkpoint begun in UnsafeRow
  keeps it. Spark's Avro writer warns "Writing Avro files with non-nullable Avro schema..."
  each time a store's encoders are made (about 24 lines per million keys): lakefeed's key
  schema is non-nullable on purpose, so that warning is silenced once Avro is chosen.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import SparkSession

from lakefeed.core.errors import ConfigError
from lakefeed.core.logs import set_spark_log_level
from lakefeed.pipeline.output_modes import PlanFacts
from lakefeed.runtime.errors import SPARK_CONF_STATIC

NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
STATE_ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
AVRO_SERIALIZER = "org.apache.spark.sql.avro.AvroSerializer"
_STARTING = threading.RLock()  # one start at a time may change the shared session's settings


def settings(facts: PlanFacts, trigger: dict) -> dict[str, str]:
    """The settings a flow with this plan (``facts``, walked once at validation, see
    :func:`lakefeed.runtime.evaluate.plan_facts`) starts with under ``trigger``."""
    chosen: dict[str, str] = {}
    if facts.processing_time_timers and "processingTime" not in trigger:
        chosen[NO_DATA_BATCHES] = "false"
    if facts.state_encoding:
        chosen[STATE_ENCODING] = facts.state_encoding
    return chosen


@contextmanager
def starting(
    spark: SparkSession, facts: PlanFacts, trigger: dict, own: Mapping[str, str] | None = None
) -> Iterator[None]:
    """Start a query (in the ``with`` block) with its :func:`settings` on ``spark``, over the
    flow's ``own`` ``spark_conf``; the session's own values are back afterwards."""
    chosen = {**(own or {}), **settings(facts, trigger)}
    if not chosen:
        yield
        return
    if STATE_ENCODING in chosen:
        set_spark_log_level(spark, [AVRO_SERIALIZER], "ERROR")
    with _STARTING, session_conf(spark, chosen):
        yield


@contextmanager
def flow_conf(spark: SparkSession, conf: Mapping[str, str], flow: str) -> Iterator[None]:
    """A flow's ``spark_conf`` (DLT's) set around its evaluation or batch; a setting Spark
    cannot change on a running session (a static or cluster setting) is refused, named."""
    if not conf:
        yield
        return
    fixed = sorted(key for key in conf if not spark.conf.isModifiable(key))
    if fixed:
        raise ConfigError(
            f"flow {flow!r}: spark_conf sets {', '.join(fixed)}, which Spark reads only when "
            "the session starts",
            fix="set it for the whole run instead (`lakefeed run --conf KEY=VALUE`, or the "
            "spec's configuration)",
            code=SPARK_CONF_STATIC,
        )
    with _STARTING, session_conf(spark, conf):
        yield


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """``conf`` set on ``spark`` for the queries started inside (each reads it at start); the
    session's own values, or their absence, are back afterwards."""
    previous = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, before in previous.items():
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)
