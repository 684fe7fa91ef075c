"""A streaming dedup whose state expires by TTL: batch time that does not grow with the state.

Spark's ``dropDuplicatesWithinWatermark`` (and ``dropDuplicates`` under a watermark) finds its
expired keys by iterating over the whole state store at every micro-batch
(``StreamingDeduplicateWithinWatermarkExec.iteratorForEviction``; Spark's
``statefulOperator.incrementalCleanupFactor`` only spreads the same scan of ``dropDuplicates``
over batches). With millions of keys each batch therefore pays O(state), not O(batch)
(docs/benchmarks.md, "Big state").

:func:`drop_duplicates_within_ttl` is a processing-time ``transformWithState`` that keeps one
state row per key, like Spark's dedup: the key and the batch time that first saw it. Eviction
does not scan the state each batch: keys are grouped into 4,096 buckets (Spark's ``hash`` of the
key columns) and each bucket has one timer that sweeps it, removing expired keys, every
``ttl / 4`` (at most once a minute), the buckets' timers spread over that period, so a batch reads
about (batch interval / period) of the state. Spark's own state TTL was the first design: its
index ordered by expiry added a second row per key, twice the writes and changelog bytes and four
RocksDB reads per new key, a 3x checkpoint and a 6x slower restart at 10 million keys
(docs/benchmarks.md, "Big state").

Semantics, exactly:

- the first row of a key is emitted (of several rows of a new key in one micro-batch, one of
  them, as with Spark's dedup), and the key is remembered for ``ttl`` of **processing time**
  from the micro-batch that saw it (as Spark's TTL: the batch's timestamp, recorded in the
  offset log, so a replayed batch uses the same one);
- a later row of a remembered key is dropped; once ``ttl`` has passed the key counts as new at
  once and its next row is emitted again (a new first sighting); its state row is removed by
  its bucket's next sweep, at most ``max(ttl / 4, 1 minute)`` later;
- the state and the table's rows commit with the micro-batch: exactly once across restarts,
  like any stateful flow on a checkpoint.

Unlike ``dropDuplicatesWithinWatermark`` the window is wall-clock time, not event time: no
watermark is needed and late rows are not dropped. The batch time and the sweeps' timers are
processing time, so the flow is a processing-time ``transformWithState`` (``lakefeed verify``
does not recompute it; triggered runs start it without no-data batches, so sweeps run with data
batches, see :mod:`lakefeed.runtime.query_start`).

Its state is stored in Spark's Avro state encoding, which the runner chooses for a flow whose
only stateful operator is this dedup (:mod:`lakefeed.runtime.query_start`): 28 bytes per key
(18 of key, 10 of value) instead of 89 as UnsafeRows, less than Spark's own dedup (34), in
RocksDB's memtables and block cache: half the state memory for the same keys (the compressed
checkpoint stays about the same; docs/benchmarks.md, "Big state, round 4").

The processor runs in the JVM (``FirstPerKey`` in lakefeed's jar, :mod:`lakefeed.spark.jvm`): a
Python ``StatefulProcessor`` pays a socket round trip to the JVM's state server for every state
call (three per new key: the implicit key, ``exists``, ``update``), and a prototype's
processing-time plan failed in Spark 4.3's planner (``TransformWithStateInPySparkExec``: a
NullPointerException in ``PythonSQLMetrics``). Without lakefeed's jar (Spark Connect, no
JDK) the helper is refused before the query starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame

from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.core.options import parse_duration
from lakefeed.spark.jvm import loadable

PROCESSOR = "dev.lakefeed.spark.FirstPerKey"  # in lakefeed's jar; its state: "seen", "sweep"
BUCKETS = 4096  # of keys, each with one sweep timer and its registered sweep time ("sweep")


def drop_duplicates_within_ttl(df: DataFrame, subset: Sequence[str], ttl: str) -> DataFrame:
    """``df`` without the rows whose ``subset`` columns were already seen within ``ttl``.

    ``ttl`` is processing time, written as Spark writes durations (``"1 day"``, ``"12 hours"``).
    Use it instead of ``dropDuplicatesWithinWatermark`` when the state holds millions of keys:
    its eviction reads only expired keys (module docstring: exact semantics and price)::

        @lf.table
        def unique_events():
            return lf.drop_duplicates_within_ttl(lf.read_stream("events"), ["event_id"], "1 day")
    """
    keys, ttl_ms = _checked_keys(df, subset), _ttl_ms(ttl)
    spark = df.sparkSession
    if not loadable(spark, PROCESSOR):
        raise PipelineDefinitionError(
            "drop_duplicates_within_ttl needs lakefeed's JVM part (its jar), which this session "
            "does not have",
            fix="run with a JDK (javac) on a classic SparkSession made by lakefeed "
            "(not Spark Connect), or use dropDuplicatesWithinWatermark",
        )
    jvm: Any = spark._jvm  # a classic session: loadable said so
    deduped = jvm.dev.lakefeed.spark.FirstPerKey.dropDuplicatesWithinTtl(
        df._jdf, keys, ttl_ms, BUCKETS
    )
    return DataFrame(deduped, spark)


def _checked_keys(df: DataFrame, subset: Sequence[str]) -> list[str]:
    if isinstance(subset, str) or not subset:
        raise PipelineDefinitionError(
            f"drop_duplicates_within_ttl needs a list of key columns, got {subset!r}",
            fix='pass the columns that identify a row, e.g. ["event_id"]',
        )
    missing = [name for name in subset if name not in df.columns]
    if missing:
        raise PipelineDefinitionError(
            f"drop_duplicates_within_ttl: no column {', '.join(map(repr, missing))} "
            f"(columns: {', '.join(df.columns)})",
            fix="name key columns of the DataFrame passed in",
        )
    return list(subset)


def _ttl_ms(ttl: str) -> int:
    seconds = parse_duration(ttl) if isinstance(ttl, str) else None
    if not seconds or seconds < 0.001:
        raise PipelineDefinitionError(
            f"drop_duplicates_within_ttl: ttl {ttl!r} is not a positive duration",
            fix='write it as Spark writes durations, e.g. "1 day" or "12 hours"',
        )
    return int(seconds * 1000)
