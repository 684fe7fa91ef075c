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
   of the same ``withWatermark`` input (:func:`without_kept_late`): the stateful operator of
   the stream never saw them. Spark's analyzer drops ``withWatermark`` from a batch plan, so
   there the call itself is wrapped while the flow function runs: the patch table's
   ``LATE_ROWS_VERIFY`` row (:mod:`lakefeed.compat.patches`), put in here for that block.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime import expect
from lakefeed.runtime.event_log import EventLog
from lakefeed.spark import offset_log

STAGING = "_lakefeed_late_rows"

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
        raise _refusal(flow, "a Spark Connect session's plan cannot be changed by lakefeed")
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


@contextlib.contextmanager
def without_kept_late(flow: str, late_rows: DataFrame | None) -> Iterator[None]:
    """While a flow function is evaluated in batch (``verify``), the input of its
    ``withWatermark`` loses the rows the stream kept in ``<table>_late`` (``late_rows``; None:
    no row was late yet): the stream's operator never saw them, so neither does the batch."""
    if late_rows is None:
        yield
        return

    def without(df: DataFrame, column: str) -> DataFrame:
        return df.exceptAll(late_rows.select(*[f"`{c}`" for c in df.columns]))

    with _before_watermark(flow, without):
        yield


@contextlib.contextmanager
def _before_watermark(flow: str, change: Callable[[DataFrame, str], DataFrame]) -> Iterator[None]:
    """``withWatermark(column, ...)`` applies to ``change(df, column)`` while the block runs
    (the patch table's ``LATE_ROWS_VERIFY`` row, for a batch recompute alone).

    Exactly one watermark per flow: without one nothing is ever late, and a join's late rows
    depend on its time bounds, not on one watermark. (Classic PySpark: the DataFrame class
    that a Spark Connect session returns is not wrapped.)
    """
    original = ClassicDataFrame.withWatermark
    calls: list[str] = []
    ClassicDataFrame.withWatermark = changed_input(original, flow, change, calls)  # type: ignore[method-assign]
    try:
        yield
    finally:
        ClassicDataFrame.withWatermark = original  # type: ignore[method-assign]
    if not calls:
        raise _refusal(flow, "this flow sets none, so no row is ever late")


def changed_input(
    original: Callable[..., DataFrame],
    flow: str,
    change: Callable[[DataFrame, str], DataFrame],
    calls: list[str],
) -> Callable[..., DataFrame]:
    """``withWatermark`` whose input is ``change(df, column)`` first; each call's column is
    recorded in ``calls`` (a second one is refused)."""

    def with_watermark(self: DataFrame, eventTime: str, delayThreshold: str) -> DataFrame:  # noqa: N803
        calls.append(eventTime)
        if len(calls) > 1:
            raise _refusal(flow, "this flow sets several (a join?)")
        return original(change(self, eventTime), eventTime, delayThreshold)

    return with_watermark


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
