"""Flows into sinks: what a sink needs of a flow's columns, and the query writing it.

Every sink write goes through a connector's own exactly-once path where there is one: a Delta
sink is the explicit Delta adapter (the flow's query id and batch id as the commit's ``txn``), a
PostgreSQL sink the upsert sink (the batch recorded in the same transaction), a
``foreach_batch_sink`` the user's function with :func:`lakefeed.current_batch` set. Kafka and
other Spark formats get Spark's writer for that format (at-least-once, as in Spark). Each query
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

from lakefeed.connectors.options import Options
from lakefeed.errors import LakefeedError
from lakefeed.lakehouse import Lakehouse
from lakefeed.pipeline import offset_log
from lakefeed.pipeline.sinks import (
    FOREACH_BATCH,
    SINK_FORMAT,
    SINK_OPTION,
    SPARK,
    BatchContext,
    Sink,
    problem,
    writing,
)

OBSERVATION = "lakefeed_sink"
"""The observed metric (``rows``) each sink flow reports per batch in its progress."""
_STREAM_ONLY = {"memory", "console", "noop", "foreach", "foreachbatch"}


def frame_problems(name: str, sink: Sink, frame: DataFrame) -> list[str]:
    """What the sink cannot take from a flow of these columns, or a format Spark lacks."""
    kind = sink.kind
    try:
        if kind == "kafka":
            from lakefeed.connectors.kafka.sink import sink_options

            sink_options(sink.options, frame.schema)
        elif kind == "postgres":
            missing = [k for k in sink.keys if k not in frame.columns]
            if missing:
                return [
                    problem(
                        f"sink {name!r}: key(s) {missing} are not in the flow's columns "
                        f"{frame.columns}",
                        "select the key columns in the flow, or fix the keys option",
                        SINK_OPTION,
                    )
                ]
    except LakefeedError as error:
        return [problem(f"sink {name!r}: {error.message}", error.fix or "", SINK_OPTION)]
    if kind == SPARK and spark_writes(frame.sparkSession, sink.format) is False:
        return [
            problem(
                f"sink {name!r}: Spark has no data source {sink.format!r} to write",
                "use kafka, delta, postgres or a format on Spark's classpath (parquet, json, "
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
        kind = self.sink.kind
        if kind == "delta":
            from lakefeed.connectors import delta

            rest = {k: v for k, v in self.sink.options.items() if k.lower() not in _DELTA_WHERE}
            path = delta_path(self.sink, lakehouse)
            return delta.write_stream(
                counted,
                path,
                self.checkpoint,
                output_mode=self.output_mode,
                query_name=self.flow,
                trigger=self.trigger,
                **rest,
            )
        if kind == "postgres":
            from lakefeed.connectors import postgres

            target = postgres.PostgresTarget(
                str(self.sink.option("url")), str(self.sink.option("dbtable")), self.sink.keys
            )
            return postgres.write_stream(
                counted,
                target,
                self.checkpoint,
                output_mode=self.output_mode,
                query_name=self.flow,
                trigger=self.trigger,
            )
        return self._finish(self._writer(counted))

    def _writer(self, frame: DataFrame) -> DataStreamWriter:
        if self.sink.kind == FOREACH_BATCH:
            assert self.sink.func is not None
            call = ForeachBatch(self.sink_name, self.flow, self.checkpoint, self.sink.func)
            return frame.writeStream.foreachBatch(call)
        if self.sink.kind == "kafka":
            from lakefeed.connectors.kafka import NAME

            return frame.writeStream.format(NAME).options(**self.sink.options)
        return frame.writeStream.format(self.sink.format).options(**self.sink.options)

    def _finish(self, writer: DataStreamWriter) -> StreamingQuery:
        writer = writer.outputMode(self.output_mode).option("checkpointLocation", self.checkpoint)
        return writer.queryName(self.flow).trigger(**self.trigger).start()


_DELTA_WHERE = {"path", "tablename"}


def delta_path(sink: Sink, lakehouse: Lakehouse) -> str:
    """A Delta sink's table: its ``path``, or ``tableName`` in the lakehouse (``tables/<name>``,
    where ``DeltaTable.forName`` finds it), outside the pipeline's own datasets."""
    path = Options(sink.options).get("path")
    if path:
        return str(path)
    return str(lakehouse.table_path(str(sink.option("tableName")).split(".")[-1]))


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
