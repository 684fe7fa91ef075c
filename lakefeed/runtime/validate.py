"""Dry run: the graph, output modes and misuse, found without starting any query."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import row_tracking
from lakefeed.pipeline import sinks
from lakefeed.pipeline.api import Dataset, Pipeline, config, config_keys
from lakefeed.pipeline.graph import Graph, PipelineError
from lakefeed.pipeline.kinds import DatasetKind
from lakefeed.pipeline.output_modes import ModeChoice, PlanFacts, choose_output_mode
from lakefeed.pipeline.sinks import Sink
from lakefeed.runtime import sinks as sink_writers
from lakefeed.runtime import state_memory
from lakefeed.runtime.evaluate import Evaluator, plan_facts, spark_refusal


@dataclass
class FlowPlan:
    name: str
    kind: str
    output_mode: str | None
    facts: PlanFacts
    columns: dict[str, str] = field(default_factory=dict)  # output column -> Spark type


@dataclass
class Validation:
    graph: Graph
    flows: dict[str, FlowPlan] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # each flow's outside sources: (format, options with "path"), for --check-connections
    sources: dict[str, list[tuple[str, dict[str, str]]]] = field(default_factory=dict)
    causes: dict[str, BaseException] = field(default_factory=dict)  # behind problems, if any
    # each dataset's DataFrame as validated: a run starts a root table's query from it
    frames: dict[str, DataFrame] = field(default_factory=dict)

    @property
    def order(self) -> list[str]:
        return self.graph.order()

    def raise_for_problems(self) -> None:
        if self.problems:
            raise PipelineError(self.problems) from next(iter(self.causes.values()), None)


def check_flow(dataset: Dataset, frame: DataFrame) -> tuple[FlowPlan, ModeChoice]:
    """Output mode, then Spark's own streaming checks for that mode."""
    facts = plan_facts(frame)
    if dataset.sink is not None:
        return _check_sink_flow(dataset, dataset.sink, frame, facts)
    if dataset.declared and dataset.flows and all(f.batch for f in dataset.flows):
        # filled by its flows' own batches only (once appends, snapshots applied as MERGEs)
        mode = "update" if any(f.snapshots for f in dataset.flows) else "append"
        columns = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
        return FlowPlan(dataset.name, dataset.kind, mode, facts, columns), ModeChoice(mode)
    choice = choose_output_mode(
        dataset.name, dataset.kind, facts, dataset.output_mode, dataset.keys
    )
    columns = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    plan = FlowPlan(dataset.name, dataset.kind, choice.mode, facts, columns)
    if dataset.kind == "table" and choice.mode in ("append", "complete", "update"):
        refusal = spark_refusal(frame, choice.mode)
        if refusal is not None:
            choice = ModeChoice(
                None,
                choice.problems
                + [f"{dataset.name!r}: Spark refuses this query in {choice.mode} mode: {refusal}"],
                choice.warnings,
            )
    if dataset.keys and dataset.quarantine:
        choice.problems.append(
            f"{dataset.name!r}: a table with keys cannot have expect_or_drop rules yet (its "
            "quarantine is append-only); filter the rows in the flow, or use expect/expect_or_fail"
        )
    stateful_watermark = facts.watermark and facts.stateful and not facts.stream_join
    if dataset.late_table and not stateful_watermark:
        choice.problems.append(
            f"{dataset.name!r}: late_rows='keep' needs a withWatermark before an aggregation or "
            "dropDuplicates (the rows they would drop are the late ones; a stream-stream join's "
            "depend on its time bounds): remove late_rows, or add the watermark"
        )
    merged = dataset.keys or dataset.cdc_state
    deletion_vectors = dataset.table_properties.get("delta.enableDeletionVectors", "")
    tracked = row_tracking.is_on(dataset.table_properties)
    if (dataset.cluster_by or tracked) and merged and deletion_vectors.lower() != "true":
        kind = "clustered" if dataset.cluster_by else "row-tracking"
        choice.problems.append(
            f"{dataset.name!r}: a {kind} table updated by MERGE (keys, AUTO CDC) needs "
            "table_properties={'delta.enableDeletionVectors': 'true'}: lakefeed commits MERGEs "
            f"into {kind} tables itself only with deletion vectors"
        )
    for what, names in (("partition column", dataset.partition_cols), ("key", dataset.keys)):
        for column in names:
            if column not in frame.columns:
                choice.problems.append(
                    f"{dataset.name!r}: {what} {column!r} is not in its output "
                    f"columns {frame.columns}"
                )
    return plan, choice


def _check_sink_flow(
    dataset: Dataset, sink: Sink, frame: DataFrame, facts: PlanFacts
) -> tuple[FlowPlan, ModeChoice]:
    """A flow into a sink: its output mode, Spark's checks for it, and what the sink needs of
    the flow's columns (or of the session: a format Spark can write)."""
    choice = sinks.output_mode(dataset.name, sink, facts)
    columns = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    problems = list(choice.problems)
    if choice.mode is not None:
        refusal = spark_refusal(frame, choice.mode)
        if refusal is not None:
            problems.append(f"Spark refuses this query in {choice.mode} mode: {refusal}")
        problems.extend(sink_writers.frame_problems(dataset.name, sink, frame))
    mode = choice.mode if not problems else None
    plan = FlowPlan(dataset.name, dataset.kind, mode, facts, columns)
    return plan, ModeChoice(mode, problems, choice.warnings)


def validate(pipeline: Pipeline, lakehouse: Lakehouse, spark: SparkSession) -> Validation:
    for key, value in pipeline.configuration.items():  # a spec's Spark confs
        spark.conf.set(key, value)
    state_problems = _apply_state_memory(spark)
    evaluator = Evaluator(spark, pipeline, lakehouse, mode="inline")
    evaluator.evaluate_all()
    for name, dataset in pipeline.datasets.items():
        frame = evaluator.frames.get(name)
        if dataset.infer_kind and frame is not None and not frame.isStreaming:
            dataset.kind = DatasetKind.MATERIALIZED_VIEW
    graph = evaluator.graph()
    problems = state_problems + graph.problems() + list(evaluator.errors.values())
    result = Validation(graph, problems=problems)
    result.sources, result.causes = evaluator.sources, evaluator.causes
    result.frames = evaluator.frames
    for name, dataset in pipeline.datasets.items():
        if dataset.kind == "sink":  # nothing of its own to plan: its flows write it
            _check_flows(dataset, evaluator, result)
            continue
        frame = evaluator.frames.get(name)
        if frame is None or dataset.kind == "view":
            continue
        plan, choice = check_flow(dataset, frame)
        result.flows[name] = plan
        result.problems.extend(choice.problems)
        result.warnings.extend(choice.warnings)
        _check_expectations(dataset, frame, result)
        _check_flows(dataset, evaluator, result)
    return result


def _check_flows(dataset: Dataset, evaluator: Evaluator, result: Validation) -> None:
    """Each append flow on its own (``once`` and snapshot flows too): it evaluates, and a
    streaming flow gets its own plan, as it runs as its own query."""
    for flow in dataset.flows:
        frame = evaluator.evaluate_flow(flow)
        if frame is None:
            continue  # why it failed is among the graph's problems or the evaluator's errors
        if flow.cdc is not None:  # its columns were checked when its target was evaluated
            problems = _cdc_target_problems(dataset)
            result.problems.extend(f"AUTO CDC flow {flow.name!r}: {p}" for p in problems)
        if flow.batch:
            continue
        plan, choice = check_flow(dataset, frame)
        result.flows[flow.name] = replace(plan, name=flow.name)
        result.problems.extend(f"flow {flow.name!r}: {p}" for p in choice.problems)


def _cdc_target_problems(dataset: Dataset) -> list[str]:
    if dataset.quarantine:
        return [
            f"target {dataset.name!r} has expect_or_drop rules, whose quarantine is append-only: "
            "filter the changes in the source view, or use expect/expect_or_fail"
        ]
    return []


def _check_expectations(dataset: Dataset, frame: DataFrame, result: Validation) -> None:
    """A predicate naming a missing column fails at analysis: say which rule, before start."""
    for rule in dataset.expectations:
        try:
            frame.select(_predicate(rule.predicate)).schema  # noqa: B018 - forces analysis
        except Exception as error:
            first = str(error).strip().split("\n")[0][:300]
            result.problems.append(
                f"{dataset.name!r}: expectation {rule.name!r} ({rule.predicate}) does not "
                f"resolve against the flow's columns {frame.columns}: {first}"
            )


def _predicate(text: str):  # noqa: ANN202

    return F.expr(text)


def _apply_state_memory(spark: SparkSession) -> list[str]:
    """Set the ``lakefeed.state.*`` RocksDB settings before any stateful query starts; a
    misuse is a problem of the pipeline, listed with the others."""
    try:
        state_memory.apply(spark, config, config_keys())
    except state_memory.StateMemoryError as error:
        return [str(error)]
    return []
