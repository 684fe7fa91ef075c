"""Flows into sinks: what a sink needs of a flow's columns, and the query writing it.

A sink in a connector's format is checked and written by that connector's sink side
(:class:`~lakefeed.connectors.base.ConnectorSink`, found through the registry), which keeps its
own exactly-once path where it has one (a Delta sink's ``txn``, the PostgreSQL sink's commit
table): this module knows no format by name, so a new sink connector needs no change here. A
``foreach_batch_sink`` is the user's function with :func:`lakefeed.current_batch` set; any other
format gets Spark's writer for it, as Spark makes it (at-least-once, as in Spark). Each query
also observes how many rows a batch hands its sink (:data:`OBSERVATION`), which the progress
listener writes to the event log as ``sink_batch``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from lakefeed.connectors.base import QueryStart
from lakefeed.connectors.registry import sink_names
from lakefeed.core.errors import LakefeedError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.errors import SINK_FORMAT, SINK_OPTION
from lakefeed.pipeline.sinks import (
    SPARK,
    BatchContext,
    Sink,
    problem,
    writing,
)
from lakefeed.spark import offset_log
from lakefeed.spark.foreach_batch import stop_aware

OBSERVATION = "lakefeed_sink"
"""The observed metric (``rows``) each sink flow reports per batch in its progress."""
_STREAM_ONLY = {"memory", "console", "noop", "foreach", "foreachbatch"}


def frame_problems(name: str, sink: Sink, frame: DataFrame) -> list[str]:
    """What the sink cannot take from a flow of these columns, or a format Spark lacks."""
    try:
        side = sink.connector_sink
        if side is not None:
            side.frame_problems(sink.options, frame.schema)
    except LakefeedError as error:
        return [problem(f"sink {name!r}: {error.message}", error.fix or "", SINK_OPTION)]
    if sink.kind == SPARK and spark_writes(frame.sparkSession, sink.format) is False:
        return [
            problem(
                f"sink {name!r}: Spark has no data source {sink.format!r} to write",
                f"use {', '.join(sink_names())} or a format on Spark's classpath (parquet, json, "
                "csv, orc, ...; a jar's format needs the jar), or @lf.foreach_batch_sink",
                SINK_FORMAT,
            )
        ]
    return []


def spark_writes(spark: SparkSession, fmt: str) -> bool | None:
    """Whether Spark knows format ``fmt`` (a Python data source or one on its classpath); None
    when there is no driver JVM to ask (Spark Connect: Spark says so when the query starts)."""
    jvm = getattr(spark, "_jvm", None)
    session = getattr(spark, "_jsparkSession", None)
    if jvm is None or session is None:
        return None
    if fmt.lower() in _STREAM_ONLY:
        return True
    state = session.sessionState()
    if state.dataSourceManager().dataSourceExists(fmt):
        return True
    try:
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            fmt, state.conf()
        )
    except Exception:  # py4j wraps Spark's DATA_SOURCE_NOT_FOUND
        return False
    return True


@dataclass(frozen=True)
class SinkQuery:
    """How one flow's query writes its sink."""

    sink_name: str
    sink: Sink
    flow: str
    checkpoint: str
    output_mode: str
    trigger: Mapping[str, Any]

    def start(self, frame: DataFrame, lakehouse: Lakehouse) -> StreamingQuery:
        counted = frame.observe(OBSERVATION, F.count(F.lit(1)).alias("rows"))
        start = QueryStart(self.checkpoint, self.output_mode, self.flow, self.trigger)
        side = self.sink.connector_sink
        if side is not None:
            return side.write_stream(counted, self.sink.options, start, lakehouse)
        return start.start(self._writer(counted))

    def _writer(self, frame: DataFrame) -> DataStreamWriter:
        if self.sink.func is not None:
            call = ForeachBatch(self.sink_name, self.flow, self.checkpoint, self.sink.func)
            return stop_aware(frame.writeStream, call)
        return frame.writeStream.format(self.sink.format).options(**self.sink.options)


@dataclass(frozen=True)
class ForeachBatch:
    """A ``foreach_batch_sink`` function as a ``foreachBatch`` body, with the batch's flow,
    query id and batch id known to :func:`lakefeed.current_batch` while it runs."""

    sink: str
    flow: str
    checkpoint: str
    func: Callable[[DataFrame, int], Any]

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        app_id = offset_log.running_query_id(self.checkpoint)
        with writing(BatchContext(self.sink, self.flow, app_id, batch_id)):
            self.func(batch, batch_id)
