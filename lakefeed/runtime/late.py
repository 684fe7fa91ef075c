"""Keep rows too late for a flow's watermark in ``<table>_late`` instead of losing them.

Why this shape: a stateful operator (aggregation, dedup) silently drops an input row whose event
time is at or before the watermark of the *previous* batch (Spark keeps one watermark for late
rows and another, the current one, for evicting state) and reports only the count,
``numRowsDroppedByWatermark``. A query has one sink, so the late rows must leave the plan before
the operator and reach the table by another path:

1. the flow's DataFrame is rebuilt (:func:`keep_late`, called by the runtime where it builds
   the flow; no pyspark method is patched) so that the input of its one ``withWatermark`` first
   goes through :func:`split_late` (``mapInArrow``): on the executors, rows with ``event_time <=``
   the previous batch's watermark (read from the checkpoint's offset log, written before the
   batch runs) are staged as Parquet under ``<late table>/_lakefeed_late_rows/<batch>/``, one file
   per input partition (a retried or replayed task writes the same file again), and the rest go
   on. Removing rows below the watermark changes no event-time maximum, so the watermark stays
   the one Spark would have computed;
2. :class:`LateRowsWriter` (``foreachBatch``) writes the batch to the table as before, then
   commits the staged rows to ``<table>_late`` with ``txnAppId``/``txnVersion`` = (query id,
   batch id), as quarantine rows are: a replayed batch commits them once;
3. ``lakefeed verify`` recomputes the flow in batch with the rows of ``<table>_late`` taken out
   of the same ``withWatermark`` input (:class:`Recompute`): the stateful operator of the
   stream never saw them. Spark drops ``withWatermark`` from a batch plan as it is called, so
   the recompute hands the flow its committed input flagged as streaming (the same rows): the
   watermark stays in the plan, the kept rows are taken out under it, and the plan is turned
   back into the batch plan Spark would have made. No pyspark method is patched.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession

from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime import expect
from lakefeed.runtime.event_log import EventLog
from lakefeed.spark import offset_log

STAGING = "_lakefeed_late_rows"
_CONNECT = "a Spark Connect session's plan cannot be changed by lakefeed"

BatchWriter = Callable[[DataFrame, int], None]


def staging_dir(late_table: str | Path, batch_id: int) -> Path:
    return Path(late_table) / STAGING / str(batch_id)


def late_mask(event_time: pa.Array, watermark_ms: int) -> pa.Array:
    """Spark's late-row predicate ``event_time <= watermark``; NULL is never late."""
    unit = pa.timestamp("us", tz=getattr(event_time.type, "tz", None))
    limit = pa.scalar(watermark_ms * 1000, unit)
    return pc.fill_null(pc.less_equal(event_time.cast(limit.type), limit), False)


def current_watermark_ms(checkpoint: str) -> tuple[int, int]:
    """(batch id, watermark for late rows) of the batch running now: the newest planned batch
    of the offset log, and the watermark the batch before it recorded (0 for the first)."""
    planned = offset_log.batch_ids(Path(checkpoint) / "offsets")
    if not planned:
        raise RuntimeError(f"{checkpoint} has no planned batch: is a query running on it?")
    previous = offset_log.read_batch(Path(checkpoint), planned[-1] - 1)
    return planned[-1], previous.watermark_ms if previous is not None else 0


def split_late(df: DataFrame, column: str, checkpoint: str, late_table: str) -> DataFrame:
    """``df`` without its too-late rows, which are staged for :class:`LateRowsWriter`."""

    def split(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:

        batch_id, watermark_ms = current_watermark_ms(checkpoint)
        late: list[pa.RecordBatch] = []
        for batch in batches:
            mask = late_mask(batch.column(column), watermark_ms)
            late.append(batch.filter(mask))
            yield batch.filter(pc.invert(mask))
        rows = pa.Table.from_batches(late) if late else None
        if rows is not None and rows.num_rows:
            partition = TaskContext.get().partitionId()  # type: ignore[union-attr]
            _stage(rows, staging_dir(late_table, batch_id) / f"part-{partition:05d}.parquet")

    return df.mapInArrow(split, df.schema)


def _stage(rows: pa.Table, path: Path) -> None:
    """Write atomically: a retried task replaces its file whole, never leaves half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    pq.write_table(rows, partial)
    os.replace(partial, path)


def keep_late(frame: DataFrame, flow: str, checkpoint: str, late_table: str) -> DataFrame:
    """``frame`` (a flow's streaming DataFrame) whose one ``withWatermark`` first splits off
    the late rows: its analysed plan with :func:`split_late` put under the watermark."""

    if getattr(frame.sparkSession, "_jvm", None) is None:  # Spark Connect: no plan to rebuild
        raise _refusal(flow, _CONNECT)
    spark = frame.sparkSession
    path = _to_watermark(frame._jdf.queryExecution().analyzed(), flow)
    watermark = path[-1][0]
    column = str(watermark.eventTime().name())
    below = _frame(spark, watermark.child())
    rebuilt = _same_output(split_late(below, column, checkpoint, late_table), watermark.child())
    for node, at in reversed(path):  # the watermark's child, then each node's on the way down
        children = _seq(node.children())
        children[at] = rebuilt
        rebuilt = node.withNewChildren(_scala(spark._jvm, children))
    return _frame(spark, rebuilt)


def _to_watermark(plan, flow: str) -> list[tuple[Any, int]]:  # noqa: ANN001 - py4j objects
    """The nodes from the plan's root down to its one ``EventTimeWatermark``, each with the
    index of its child on the way (the watermark's: its one child)."""
    found: list[list[tuple[Any, int]]] = []
    pending: list[list[tuple[Any, int]]] = [[(plan, 0)]]
    while pending:
        path = pending.pop()
        node = path[-1][0]
        if node.nodeName() == "EventTimeWatermark":
            found.append(path)
        children = _seq(node.children())
        pending.extend([*path[:-1], (node, i), (child, 0)] for i, child in enumerate(children))
    if not found:
        raise _refusal(flow, "this flow sets none, so no row is ever late")
    if len(found) > 1:
        raise _refusal(flow, "this flow sets several (a join?)")
    return found[0]


def _frame(spark: SparkSession, plan: Any) -> DataFrame:
    jvm = spark._jvm
    assert jvm is not None
    dataset = jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan)
    return DataFrame(dataset, spark)


def _same_output(frame: DataFrame, like: Any) -> Any:
    """``frame``'s plan with ``like``'s output attributes (their ids: what the nodes above
    refer to), its columns aliased to them by position."""
    jvm = frame.sparkSession._jvm
    assert jvm is not None
    plan = frame._jdf.queryExecution().analyzed()
    new, old = _seq(plan.output()), _seq(like.output())
    expressions = jvm.org.apache.spark.sql.catalyst.expressions
    none = _scala(jvm, [])
    aliases = [
        expressions.Alias(
            n, o.name(), o.exprId(), o.qualifier(), jvm.scala.Option.apply(o.metadata()), none
        )
        for n, o in zip(new, old, strict=True)
    ]
    return jvm.org.apache.spark.sql.catalyst.plans.logical.Project(_scala(jvm, aliases), plan)


def _seq(scala_seq: Any) -> list[Any]:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _scala(jvm: Any, items: list[Any]) -> Any:
    """A Scala ``Seq`` of ``items`` (py4j objects)."""
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(items).toSeq()


@dataclass
class Recompute:
    """verify's batch recompute of a ``late_rows="keep"`` flow: its input without the rows the
    stream kept in ``<table>_late`` (``kept``), taken out where the stream split them off.

    The evaluator passes each streaming input of the flow through :meth:`input` and the flow's
    frame through :meth:`result`. Exactly one watermark per flow: without one nothing is ever
    late, and a join's late rows depend on its time bounds, not on one watermark.
    """

    flow: str
    kept: DataFrame
    _inputs: dict[int, DataFrame] = field(default_factory=dict)  # RDD id -> the batch read

    def input(self, frame: DataFrame) -> DataFrame:
        """``frame`` (a batch read of what the stream read) flagged as streaming, over the same
        rows, so that the flow's ``withWatermark`` stays in its plan."""
        spark = frame.sparkSession
        if getattr(spark, "_jvm", None) is None:  # Spark Connect: no plan to rebuild
            raise _refusal(self.flow, _CONNECT)
        jdf = frame._jdf
        rows = jdf.queryExecution().toRdd()
        flagged = spark._jsparkSession.internalCreateDataFrame(rows, jdf.schema(), True)
        self._inputs[rows.id()] = frame
        return DataFrame(flagged, spark)

    def result(self, frame: DataFrame) -> DataFrame:
        """The flow's frame as the batch plan Spark makes of it, its one watermark's input
        without the kept rows."""
        plan = frame._jdf.queryExecution().analyzed()
        _to_watermark(plan, self.flow)  # exactly one, else refused
        return _frame(frame.sparkSession, _transform(frame.sparkSession._jvm, plan, self._batch))

    def _batch(self, node: Any) -> Any | None:
        """A flagged input back as its batch read; the watermark as its input without the kept
        rows (what Spark's analyzer does to a batch plan's watermark, less those rows); None
        for any other node."""
        name = node.nodeName()
        if name == "LogicalRDD" and node.isStreaming() and node.rdd().id() in self._inputs:
            return _same_output(self._inputs[node.rdd().id()], node)
        if name != "EventTimeWatermark":
            return None
        spark = self.kept.sparkSession
        below = _frame(spark, _transform(spark._jvm, node.child(), self._batch))
        kept = self.kept.select(*[f"`{c}`" for c in below.columns])
        return below.exceptAll(kept)._jdf.queryExecution().analyzed()


def _transform(jvm: Any, node: Any, change: Callable[[Any], Any | None]) -> Any:
    """``node`` with each node ``change`` answers for replaced by its answer, the others rebuilt
    over their changed children; the same object when nothing changed."""
    replaced = change(node)
    if replaced is not None:
        return replaced
    children = _seq(node.children())
    rebuilt = [_transform(jvm, child, change) for child in children]
    if all(new is old for new, old in zip(rebuilt, children, strict=True)):
        return node
    return node.withNewChildren(_scala(jvm, rebuilt))


def _refusal(flow: str, problem: str) -> PipelineError:
    return PipelineError(
        [f"{flow!r}: late_rows='keep' splits the input of one withWatermark, and {problem}"],
        fix="remove late_rows='keep', or give the flow one withWatermark before its aggregation",
    )


@dataclass
class LateRowsWriter:
    """``foreachBatch`` body: the flow's own write, then its staged late rows, once.

    A batch without late rows commits nothing to ``<table>_late`` (the table appears with the
    first late row); one with late rows commits them with the batch's transaction id.
    """

    write: BatchWriter
    late_table: str
    checkpoint: str
    flow: str
    events: EventLog

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.write(batch, batch_id)  # runs the plan: the batch's late rows are staged now
        staged = staging_dir(self.late_table, batch_id)
        files = sorted(str(p) for p in staged.glob("part-*.parquet"))
        if files:
            late = batch.sparkSession.read.parquet(*files)
            app_id = offset_log.running_query_id(self.checkpoint)
            offsets = offset_log.fingerprint(self.checkpoint, batch_id)
            expect.write_batch(late, self.late_table, "append", app_id, batch_id, [], offsets)
            rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
            self.events.emit(
                "late_rows",
                f"batch {batch_id}: {rows} rows too late for the watermark kept",
                flow=self.flow,
                details={"batch_id": batch_id, "kept": rows, "table": Path(self.late_table).name},
            )
        shutil.rmtree(staged, ignore_errors=True)
