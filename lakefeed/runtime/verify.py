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

Rows too late for a flow's watermark never reach its stateful operator. With
``late_rows="keep"`` the stream kept them in ``<table>_late``, and the batch recompute leaves
exactly those rows out of the flow's ``withWatermark`` input; dropped ones (the default) are known
only by their count, so the batch has their results too: a difference then says how many the
flow dropped. An event-time ``transformWithState`` is compared like any append flow: what it
emitted is final. A processing-time one emits by the wall clock (timers, TTL), which no batch
recompute replays: its table is reported as not compared. So is a stream–static join's: each
micro-batch read its static side (a Delta table's latest version, a database table) as it was
then, which a recompute over today's tables cannot replay; its row counts are reported (a left
join to a table keyed like the stream keeps them equal), and its streaming input, a table of its
own, is compared as any other.

An AUTO CDC target is recomputed by the CDC engine itself in batch: each flow's changes up to
what its checkpoint committed, applied as one batch to an empty target in a scratch folder (as
``--full-refresh`` rebuilds it), then compared row for row. The fold orders each key's changes
by ``sequence_by`` whatever batches they came in, so the result, SCD2's ``__START_AT`` and
``__END_AT`` included (they are sequence values), is the stream's. A target fed by snapshots
(``create_auto_cdc_from_snapshot_flow``) is not compared: its snapshots are not kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType, TimestampType

from lakefeed.cdc.apply import ApplyChanges
from lakefeed.connectors import delta
from lakefeed.core.errors import DataLossRiskError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.storage import remove_tree
from lakefeed.delta import create
from lakefeed.delta import table as delta_table
from lakefeed.pipeline import guard
from lakefeed.pipeline.api import Pipeline
from lakefeed.runtime import expect
from lakefeed.runtime.committed import CommittedInput
from lakefeed.runtime.errors import VerifyCatchUpError
from lakefeed.runtime.evaluate import Evaluator, union_all
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.progress import dropped_late
from lakefeed.runtime.results import TableComparison
from lakefeed.runtime.run.context import ONCE_DONE
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from lakefeed.runtime.validate import Validation, validate

SAMPLE = 5
WALL_CLOCK = (
    "not compared: a processing-time transformWithState emits by the wall clock (its timers, "
    "its state TTL), which a batch recompute cannot replay"
)
SNAPSHOTS = (
    "not compared: an AUTO CDC target fed by snapshots (create_auto_cdc_from_snapshot_flow) "
    "cannot be recomputed, its past snapshots are not kept"
)
SCRATCH = "_lakefeed_verify_"
"""Prefix of the lakehouse folder holding a recomputed AUTO CDC target while it is compared."""
STATIC_JOIN = (
    "not compared: each micro-batch joined its static side (a table or query read anew by every "
    "batch) as it was then, which a batch recompute over today's tables cannot replay; the "
    "row counts are the stream's and the recompute's"
)
# Column names of the row counts (no user column is named so).
_SIDE, _IN_STREAM, _IN_BATCH = "__lakefeed_side", "__lakefeed_in_stream", "__lakefeed_in_batch"


def verify(
    pipeline: Pipeline, lakehouse: Lakehouse, spark: SparkSession, run_first: bool = True
) -> list[TableComparison]:
    """Bring the stream up to date (available-now) unless told not to, then compare.

    A table behind what its flow's checkpoint committed, or a flow that has read past its
    source table, is reported INCONSISTENT with the reason (the catch-up run refuses them).
    """
    if run_first:
        catch_up(pipeline, lakehouse, spark)
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


def catch_up(pipeline: Pipeline, lakehouse: Lakehouse, spark: SparkSession) -> None:
    """The available-now run before a comparison, which must end "completed". One stopped
    early (the lease taken over, SIGINT/SIGTERM) or with a failed flow is refused
    (:class:`VerifyCatchUpError`): a comparison then would judge tables against input their
    flows never reached, and a sink, which is not compared, would pass with rows missing. A
    table behind its checkpoint is not refused here: it is reported INCONSISTENT below."""
    options = RunOptions(mode="available-now")
    with contextlib.suppress(DataLossRiskError):
        result = PipelineRunner(pipeline, lakehouse, spark, options).run()
        if result.reason != "completed" or not result.ok:
            failed = "".join(
                f"; {name}: {result.errors.get(name, 'failed')}" for name in result.failed
            )
            raise VerifyCatchUpError(
                f"verify's catch-up run ended with {result.reason!r}{failed}, so its flows may "
                "be behind their input and nothing was compared",
                fix="run verify again once nothing stops the run (`verify --no-run` compares "
                "the tables as they are)",
            )


def compare_table(
    pipeline: Pipeline,
    lakehouse: Lakehouse,
    spark: SparkSession,
    validation: Validation,
    name: str,
) -> TableComparison:
    if pipeline.datasets[name].cdc_state:
        return compare_cdc(pipeline, lakehouse, spark, name)
    plan = validation.flows.get(name)
    if plan is not None and plan.facts.processing_time_timers:
        return TableComparison(name, 0, 0, 0, 0, 0, note=WALL_CLOCK, excluded=True)
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
    if plan is not None and plan.facts.static_join:
        counts = (stream.count(), batch.count())
        return TableComparison(name, *counts, 0, 0, 0, note=STATIC_JOIN, excluded=True)
    appends = (
        plan is not None
        and plan.output_mode == "append"
        and (plan.facts.aggregate or plan.facts.stream_join)
    )
    watermark = _watermark([bounds for _, bounds in parts])
    result = _compare(name, _comparable(stream), _comparable(batch), appends, watermark)
    dropped = dropped_late_rows(lakehouse, name) if result.only_batch else 0
    if dropped:
        note = (
            f"the stream dropped {dropped} rows too late for its watermark, which the batch has: "
            "keep them with late_rows='keep' to compare without them"
        )
        return dataclasses.replace(result, note="; ".join(filter(None, [result.note, note])))
    return result


def compare_cdc(
    pipeline: Pipeline, lakehouse: Lakehouse, spark: SparkSession, name: str
) -> TableComparison:
    """AUTO CDC target ``name`` against its flows' committed changes applied in one batch by
    the CDC engine (into a scratch target, removed afterwards)."""
    dataset = pipeline.datasets[name]
    if any(flow.snapshots is not None for flow in dataset.flows):
        return TableComparison(name, 0, 0, 0, 0, 0, note=SNAPSHOTS, excluded=True)
    parts = _committed(pipeline, lakehouse, name)
    if not parts:
        return _nothing_committed(lakehouse, name)
    stream = delta.read(spark, str(lakehouse.table_path(name)))
    scratch = lakehouse.root / f"{SCRATCH}{uuid.uuid4().hex}"
    target, state = str(scratch / "target"), str(scratch / "state")
    try:
        create.create(target, create.nullable(stream.schema))
        for flow, bounds in parts:
            evaluator = Evaluator(spark, pipeline, lakehouse, mode="batch", bounds=bounds)
            appended = pipeline.append_flows[flow]
            changes = evaluator.evaluate_flow(appended)
            if changes is None or appended.cdc is None:
                errors = evaluator.errors  # keyed by what failed: the flow or a dataset it reads
                note = errors.get(flow) or "; ".join(errors.values()) or "could not evaluate"
                return TableComparison(name, 0, 0, 0, 0, 0, note=note, verified=False)
            # What the stream applies: its rows checked against the table's rules.
            checked = expect.checked_rows(changes, dataset.expectations, name)
            ApplyChanges(appended.cdc, target, state, None, f"verify-{flow}")(checked, 0)
        batch = delta.read(spark, target).select(*stream.columns)
        return _compare(name, _comparable(stream), _comparable(batch), False, None)
    finally:
        remove_tree(str(scratch))


def dropped_late_rows(lakehouse: Lakehouse, flow: str) -> int:
    """Rows the flow's stateful operators dropped as late, as its progress in the event log
    says (what Spark counted; the rows themselves are gone)."""
    progress = read_events(lakehouse.event_log_path, event_types=["flow_progress"], flow=flow)
    return sum(dropped_late(event["details"]) for event in progress)


def _compare(
    name: str, stream: DataFrame, batch: DataFrame, appends: bool, watermark: int | None
) -> TableComparison:
    """Multiset difference of ``stream`` and ``batch`` (what ``exceptAll`` gives both ways) from
    one pass over each: every distinct row with how often each side has it, kept while the
    totals and samples are read. The batch side re-reads the sources (a generator, Kafka): the
    two ``exceptAll`` and four counts this replaces recomputed it about eight times."""
    counts = _row_counts(stream, batch).persist()
    try:
        extra = F.greatest(F.col(_IN_STREAM) - F.col(_IN_BATCH), F.lit(0))
        missing = F.greatest(F.col(_IN_BATCH) - F.col(_IN_STREAM), F.lit(0))
        # An append-mode aggregate or join: batch rows in windows the stream has not closed.
        still_open = _open_windows(counts, watermark) if appends else None
        is_open = still_open if still_open is not None else F.lit(False)
        totals = counts.agg(
            F.sum(_IN_STREAM),
            F.sum(_IN_BATCH),
            F.sum(extra),
            F.sum(F.when(~is_open, missing)),
            F.sum(F.when(is_open, missing)),
        ).first()
        rows, batch_rows, only_stream, only_batch, pending = (int(v or 0) for v in totals or ())
        samples = [f"stream only: {r}" for r in _sample(counts, extra > 0, stream.columns)] + [
            f"batch only: {r}" for r in _sample(counts, (missing > 0) & ~is_open, stream.columns)
        ]
    finally:
        counts.unpersist()
    note = f"windows past watermark {watermark} ms are still open in the stream"
    return TableComparison(
        name,
        rows,
        batch_rows,
        only_stream,
        only_batch,
        pending,
        tuple(samples),
        note if still_open is not None else "",
    )


def _row_counts(stream: DataFrame, batch: DataFrame) -> DataFrame:
    """Each distinct row of either side with its count in ``stream`` and in ``batch``."""
    side = F.col(_SIDE)
    tagged = stream.withColumn(_SIDE, F.lit(1)).unionByName(batch.withColumn(_SIDE, F.lit(-1)))
    return tagged.groupBy(*[F.col(f"`{c}`") for c in stream.columns]).agg(
        F.count(F.when(side > 0, 1)).alias(_IN_STREAM),
        F.count(F.when(side < 0, 1)).alias(_IN_BATCH),
    )


def _sample(counts: DataFrame, which: Column, columns: list[str]) -> list[Row]:
    return counts.filter(which).select(*[F.col(f"`{c}`") for c in columns]).limit(SAMPLE).collect()


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
