"""``lakefeed verify``: the streaming result against a batch recompute, table by table.

Each streaming table's batch result is its flow function evaluated as a batch over exactly the
input its checkpoint committed (see :mod:`lakefeed.runtime.committed`): the source rows,
offsets or files up to the last committed batch, upstream tables as of the version the stream
had read. A difference then points at that flow, never at input that arrived since or at a
restart. A materialized view is recomputed over the current upstream tables, with the same
expectations. Doubles are compared rounded to 9 significant places: summing in another order
changes the last bits of an average. For an append-mode aggregate, rows whose newest timestamp
is past the last committed watermark are windows the stream has not closed yet: they are
reported as pending, not as differences. So are an outer stream–stream join's unmatched rows
whose newest timestamp is past it (give them one, e.g. ``event_time + <time bound>``: the
moment no match can come any more, when the join emits them).
"""

from __future__ import annotations

import contextlib

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType, TimestampType

from lakefeed.connectors import delta
from lakefeed.connectors.delta import table as delta_table
from lakefeed.errors import DataLossRiskError
from lakefeed.lakehouse import Lakehouse
from lakefeed.pipeline import guard
from lakefeed.pipeline.api import Pipeline
from lakefeed.results import TableComparison
from lakefeed.runtime import expect
from lakefeed.runtime.committed import CommittedInput
from lakefeed.runtime.evaluate import Evaluator, union_all
from lakefeed.runtime.runner import ONCE_DONE, PipelineRunner, RunOptions
from lakefeed.runtime.validate import Validation, validate

SAMPLE = 5


def verify(
    pipeline: Pipeline, lakehouse: Lakehouse, spark: SparkSession, run_first: bool = True
) -> list[TableComparison]:
    """Bring the stream up to date (available-now) unless told not to, then compare.

    A table behind what its flow's checkpoint committed, or a flow that has read past its
    source table, is reported INCONSISTENT with the reason (the catch-up run refuses them).
    """
    if run_first:
        with contextlib.suppress(DataLossRiskError):  # reported table by table below
            PipelineRunner(pipeline, lakehouse, spark, RunOptions(mode="available-now")).run()
    validation = validate(pipeline, lakehouse, spark)
    validation.raise_for_problems()
    flows, tables = guard.lakehouse_flows(pipeline, lakehouse, validation.sources)
    owner = {f.name: f.table for f in flows}
    behind: dict[str, list[str]] = {}
    for found in guard.tables_behind(flows, tables):
        behind.setdefault(owner[found.flow], []).append(found.reason)
    return [
        TableComparison(name, 0, 0, 0, 0, 0, inconsistent="; ".join(behind[name]))
        if name in behind
        else compare_table(pipeline, lakehouse, spark, validation, name)
        for name in validation.order
        if pipeline.datasets[name].stored
    ]


def compare_table(
    pipeline: Pipeline,
    lakehouse: Lakehouse,
    spark: SparkSession,
    validation: Validation,
    name: str,
) -> TableComparison:
    if pipeline.datasets[name].cdc_state:
        note = "an AUTO CDC target is not compared with a batch recompute yet (docs/cdc.md)"
        return TableComparison(name, 0, 0, 0, 0, 0, note=note, verified=False)
    plan = validation.flows.get(name)
    streaming = plan is not None and plan.facts.streaming
    parts = _committed(pipeline, lakehouse, name) if streaming else [(name, None)]
    if not parts:
        return _nothing_committed(lakehouse, name)
    frames = []
    for flow, bounds in parts:
        evaluator = Evaluator(spark, pipeline, lakehouse, mode="batch", bounds=bounds)
        appended = pipeline.append_flows.get(flow)
        frame = evaluator.evaluate_flow(appended) if appended else evaluator.evaluate(name)
        if frame is None:
            note = evaluator.errors.get(flow, "could not evaluate")
            return TableComparison(name, 0, 0, 0, 0, 0, note=note, verified=False)
        frames.append(frame)
    rules = pipeline.datasets[name].expectations
    batch = expect.kept_rows(expect.with_flags(union_all(frames), rules, name), rules)
    stream = delta.read(spark, str(lakehouse.table_path(name)))
    batch = batch.select(*stream.columns)
    stream, batch = _comparable(stream), _comparable(batch)
    only_stream = stream.exceptAll(batch)
    only_batch = batch.exceptAll(stream)
    pending, note = 0, ""
    waits = plan is not None and (plan.facts.aggregate or plan.facts.stream_join)
    if waits and plan is not None and plan.output_mode == "append":
        watermark = _watermark([bounds for _, bounds in parts])
        still_open = _open_windows(only_batch, watermark)
        if still_open is not None:
            # A filter, not exceptAll of a filtered copy: Spark's exceptAll of a frame with
            # itself (the same attributes on both sides) removed nothing.
            pending = only_batch.filter(still_open).count()
            only_batch = only_batch.filter(~still_open)
            note = f"windows past watermark {watermark} ms are still open in the stream"
    samples = [f"stream only: {r}" for r in only_stream.limit(SAMPLE).collect()] + [
        f"batch only: {r}" for r in only_batch.limit(SAMPLE).collect()
    ]
    return TableComparison(
        name,
        stream.count(),
        batch.count(),
        only_stream.count(),
        only_batch.count(),
        pending,
        tuple(samples),
        note,
    )


def _committed(
    pipeline: Pipeline, lakehouse: Lakehouse, name: str
) -> list[tuple[str, CommittedInput | None]]:
    """Each flow that wrote streaming table ``name`` with the input its checkpoint committed:
    the table's own flow, or each append flow (a ``once`` flow that ran: all its input)."""
    dataset = pipeline.datasets[name]
    parts: list[tuple[str, CommittedInput | None]] = []
    for flow in pipeline.flow_names(dataset):
        checkpoint = lakehouse.checkpoint_path(flow)
        appended = pipeline.append_flows.get(flow)
        if appended is not None and appended.once:
            if (checkpoint / ONCE_DONE).exists():
                parts.append((flow, None))
        elif (bounds := CommittedInput.of(flow, checkpoint)) is not None:
            parts.append((flow, bounds))
    return parts


def _watermark(bounds: list[CommittedInput | None]) -> int | None:
    """The lowest watermark the flows committed: a window past it may still be open in one."""
    marks = [b.last.watermark_ms for b in bounds if b is not None]
    return min(marks) if marks else None


def _nothing_committed(lakehouse: Lakehouse, name: str) -> TableComparison:
    """A streaming table whose checkpoint has committed no batch must be empty."""
    if delta_table.has_rows(str(lakehouse.table_path(name))):
        note = "the table has rows but its checkpoint has committed no batch"
        return TableComparison(name, 0, 0, 0, 0, 0, note=note, verified=False)
    return TableComparison(name, 0, 0, 0, 0, 0, note="no batch committed yet: nothing to compare")


def _comparable(df: DataFrame) -> DataFrame:
    columns = []
    for field_ in df.schema.fields:
        column = F.col(f"`{field_.name}`")
        if isinstance(field_.dataType, DoubleType | FloatType):
            column = F.expr(f"CAST(format_number(`{field_.name}`, 9) AS STRING)")
        columns.append(column.alias(field_.name))
    return df.select(*columns)


def _open_windows(rows: DataFrame, watermark_ms: int | None) -> Column | None:
    """Which of ``rows`` belong to windows the stream's watermark has not closed (None: the
    rows have no event time to tell by)."""
    times = [f.name for f in rows.schema.fields if isinstance(f.dataType, TimestampType)]
    if not times:
        return None
    if watermark_ms is None:
        return F.lit(True)
    newest = F.greatest(*[F.col(t) for t in times]) if len(times) > 1 else F.col(times[0])
    return F.coalesce(newest > F.timestamp_millis(F.lit(watermark_ms)), F.lit(False))
