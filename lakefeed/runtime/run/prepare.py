"""Before anything starts: every streaming flow planned, its table created and its checkpoint
guarded. A problem with any flow is reported with all the others and nothing starts, so a run
never leaves half of a pipeline ahead of the rest."""

from __future__ import annotations

from collections.abc import Collection

from pyspark.sql import DataFrame

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import create
from lakefeed.delta import table as delta_table
from lakefeed.pipeline.api import Dataset
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.conform import create_declared
from lakefeed.runtime.evaluate import Evaluator
from lakefeed.runtime.run.checkpoints import guard_flow
from lakefeed.runtime.run.context import FlowState, RunContext
from lakefeed.runtime.validate import Validation, check_flow


class Preparer:
    """Fills the run's ``flows`` with one ready :class:`FlowState` per streaming flow."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def prepare(self, validation: Validation, refreshed: Collection[str]) -> None:
        """Real plans in dependency order; every table exists and every guard passes, or
        nothing starts. ``refreshed``: the tables a full refresh has just reset."""
        run = self.run
        streams, batches = run.evaluator("stream"), run.evaluator("batch")
        problems: list[str] = []
        private = [d.name for d in run.pipeline.datasets.values() if d.private and d.stored]
        run.lakehouse.set_private_tables(private)
        for dataset in run.outputs(validation):
            if dataset.sink is not None:
                problems.extend(self._prepare_flows(dataset, streams))
                continue
            validated = self._start_as_validated(dataset, validation, refreshed)
            if validated is not None:
                problems.extend(validated)
                continue
            evaluator = streams if dataset.kind == "table" else batches
            problems.extend(self._prepare_dataset(dataset, evaluator, streams))
        if problems:
            causes = {**batches.causes, **streams.causes}
            raise PipelineError(problems) from next(iter(causes.values()), None)

    def _prepare_dataset(
        self, dataset: Dataset, evaluator: Evaluator, streams: Evaluator
    ) -> list[str]:
        """A stored dataset evaluated afresh: its table created, then its own flow (a
        streaming table) or its append flows (a declared table) made ready."""
        frame = evaluator.evaluate(dataset.name)
        if frame is None:
            return [evaluator.errors.get(dataset.name, f"{dataset.name!r} failed")]
        plan, choice = check_flow(dataset, frame)
        if choice.problems:
            return list(choice.problems)
        create_if_missing(self.run.lakehouse, dataset, frame)
        if dataset.declared:
            return self._prepare_flows(dataset, streams)
        if dataset.kind != "table":
            return []
        problems = guard_flow(self.run, dataset, plan)
        sources = evaluator.sources.get(dataset.name, [])
        self.run.flows[dataset.name] = FlowState(dataset, plan, frame=frame, sources=sources)
        return problems

    def _start_as_validated(
        self, dataset: Dataset, validation: Validation, refreshed: Collection[str]
    ) -> list[str] | None:
        """A streaming table that reads only outside sources runs the very DataFrame validation
        analysed and checked: evaluating and analysing it again would delay its first batch
        (by ~1 s on a cold JVM) for the same plan. Not for tables reading other datasets
        (inline in validation, from their Delta tables in a run), split late rows or append
        flows, nor when a full refresh has just reset it. None: evaluate it again; else the
        guard's problems (none: its flow is ready)."""
        frame = validation.frames.get(dataset.name)
        plan = validation.flows.get(dataset.name)
        plain = dataset.kind == "table" and not dataset.declared and dataset.late_table is None
        if frame is None or plan is None or not plain or not frame.isStreaming:
            return None
        if validation.graph.nodes[dataset.name].reads:
            return None
        if dataset.name in refreshed:
            return None
        create_if_missing(self.run.lakehouse, dataset, frame)
        problems = guard_flow(self.run, dataset, plan)
        if not problems:
            sources = validation.sources.get(dataset.name, [])
            self.run.flows[dataset.name] = FlowState(dataset, plan, frame=frame, sources=sources)
        return problems

    def _prepare_flows(self, dataset: Dataset, streams: Evaluator) -> list[str]:
        """One query, plan and checkpoint guard per streaming append flow into ``dataset``."""
        problems: list[str] = []
        for flow in dataset.flows:
            if flow.batch:
                continue
            frame = streams.evaluate_flow(flow)
            if frame is None:
                problems.append(streams.errors.get(flow.name, f"flow {flow.name!r} failed"))
                continue
            plan, choice = check_flow(dataset, frame)
            problems.extend(f"flow {flow.name!r}: {p}" for p in choice.problems)
            if not choice.problems:
                problems.extend(guard_flow(self.run, dataset, plan, flow.name))
                sources = streams.sources.get(flow.name, [])
                state = FlowState(dataset, plan, frame=frame, sources=sources, flow=flow)
                self.run.flows[flow.name] = state
        return problems


def create_if_missing(lakehouse: Lakehouse, dataset: Dataset, frame: DataFrame) -> None:
    """Readers of a table resolve its schema at start: create it empty beforehand.

    A metadata-only Delta commit through delta-rs, so no Spark job (and no Python worker)
    runs before the first real batch.
    """
    path = str(lakehouse.table_path(dataset.name))
    if delta_table.exists(path):
        delta_table.describe(path, dataset.comment, dataset.table_properties)
        return
    if dataset.schema is not None:
        return create_declared(path, dataset)
    create.create(
        path,
        create.nullable(frame.schema),
        partition_by=dataset.partition_cols,
        description=dataset.comment,
        configuration=dataset.table_properties,
        cluster_by=dataset.cluster_by,
    )
