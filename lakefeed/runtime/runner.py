"""Run a pipeline in one of four modes with the same flow functions.

- ``continuous``: every streaming table runs at once with a ``processingTime`` trigger until
  SIGINT/SIGTERM or ``duration``; a failed flow restarts with exponential backoff while the
  others keep running; snapshot flows (AUTO CDC FROM SNAPSHOT) apply new snapshots and
  materialized views refresh every ``refresh_interval`` and at the end.
- ``available-now``: flow by flow in dependency order, each with ``trigger(availableNow=True)``
  (everything present, in rate-limited batches), then stops.
- ``once``: like available-now but one micro-batch per flow (``trigger(once=True)``, which
  ignores rate limits such as ``maxFilesPerTrigger``).
- ``backfill``: the functions evaluated as batch DataFrames over all data, replacing targets;
  their checkpoints are removed since their offsets no longer describe the table, so the next
  streaming run is refused by the checkpoint guard until ``--full-refresh``.

Stopping waits for the running micro-batch of each query to finish before ``stop()``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql.streaming import StreamingQuery

from lakefeed.cdc.apply import ApplyChanges
from lakefeed.cdc.snapshot import ApplySnapshots, snapshot_app_id
from lakefeed.cdc.spec import state_table
from lakefeed.connectors import delta, registry
from lakefeed.core.errors import CheckpointError
from lakefeed.core.explain import Failure, explain
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.logs import get_logger
from lakefeed.core.storage import AnyPath, as_path, remove_tree
from lakefeed.delta import create
from lakefeed.delta import table as delta_table
from lakefeed.pipeline import guard
from lakefeed.pipeline.api import AppendFlow, Dataset, Pipeline, config
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.kinds import RunMode, choices
from lakefeed.runtime import expect, state_memory
from lakefeed.runtime.compaction import AutoCompactor, Policy
from lakefeed.runtime.conform import create_declared
from lakefeed.runtime.evaluate import Evaluator
from lakefeed.runtime.event_log import EventLog, Retention
from lakefeed.runtime.late import LateRowsWriter
from lakefeed.runtime.lease import Lease
from lakefeed.runtime.listener import ProgressListener, attach, expectation_event
from lakefeed.runtime.pools import flow_pool
from lakefeed.runtime.query_start import flow_conf, starting
from lakefeed.runtime.sinks import SinkQuery
from lakefeed.runtime.skipped import report_skipped_files
from lakefeed.runtime.upsert import KeyedUpsert
from lakefeed.runtime.validate import FlowPlan, Validation, check_flow, validate
from lakefeed.spark import connect
from lakefeed.spark.checkpoint_files import check_checkpoint_files, clear_interrupted_start
from lakefeed.spark.foreach_batch import stop_aware

log = get_logger(__name__)

MODES = tuple(choices(RunMode))
ONCE_DONE = "_lakefeed_once_done"  # in a once flow's checkpoint folder: it has run


def orphaned_rows(pipeline: Pipeline, lakehouse: Lakehouse, dataset: Dataset, flow: str) -> bool:
    """Rows in the target that a missing checkpoint of ``flow`` would duplicate. A new
    append flow into a table its other flows fill starts from its source's start by design;
    one that has written the table before (or a table no flow has progress for) has not. A
    sink may hold rows of other writers: only a flow that has written it counts."""
    table = written_table(lakehouse, dataset)
    if table is None or not delta_table.has_rows(str(table)):
        return False
    if dataset.sink is not None:
        return flow in guard.flows_started(table)
    if not dataset.declared:
        return True
    siblings = [lakehouse.checkpoint_path(f) for f in pipeline.flow_names(dataset)]
    started = any(guard.has_progress(c) or (c / ONCE_DONE).exists() for c in siblings)
    return flow in guard.flows_started(table) or not started


def written_table(lakehouse: Lakehouse, dataset: Dataset) -> AnyPath | None:
    """The Delta table ``dataset``'s flows fill: its own, or a sink's when the guard can look
    into it (a Delta sink); None for other sinks."""
    if dataset.sink is None:
        return lakehouse.table_path(dataset.name)
    root = dataset.sink.delta_root(lakehouse)
    return as_path(root) if root is not None else None


@dataclass
class RunOptions:
    mode: str = "continuous"
    trigger_interval: str = "5 seconds"
    duration: float | None = None
    full_refresh: tuple[str, ...] = ()
    full_refresh_all: bool = False
    max_restarts: int = 5
    restart_backoff: float = 2.0
    max_backoff: float = 60.0
    refresh_interval: float = 60.0
    compact_interval: float = 30.0  # how often streaming tables are checked for small files
    stop_timeout: float = 120.0

    def __post_init__(self) -> None:
        # ``--full-refresh a,b`` and repeated ``--full-refresh a --full-refresh b`` alike
        self.full_refresh = tuple(
            n.strip() for v in self.full_refresh for n in v.split(",") if n.strip()
        )
        if self.mode not in MODES:
            raise PipelineError([f"unknown mode {self.mode!r}: use one of {', '.join(MODES)}"])


@dataclass
class FlowState:
    dataset: Dataset
    plan: FlowPlan
    query: StreamingQuery | None = None
    attempts: int = 0
    restart_at: float | None = None
    failed: bool = False
    error: str | None = None  # the last failure, as a user reads it
    frame: DataFrame | None = None  # evaluated by _prepare; a restart evaluates afresh
    sources: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    flow: AppendFlow | None = None  # an append flow into ``dataset``, else its own query

    @property
    def name(self) -> str:
        """The flow's name: its query, checkpoint and event-log name."""
        return self.flow.name if self.flow is not None else self.dataset.name


@dataclass
class RunResult:
    run_id: str
    failed: list[str] = field(default_factory=list)
    reason: str = "completed"
    errors: dict[str, str] = field(default_factory=dict)  # failed flow -> why

    @property
    def ok(self) -> bool:
        return not self.failed


class PipelineRunner:
    def __init__(
        self,
        pipeline: Pipeline,
        lakehouse: Lakehouse,
        spark: SparkSession,
        options: RunOptions | None = None,
        on_tick: Callable[[PipelineRunner], None] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.lakehouse = lakehouse
        self.spark = spark
        self.options = options or RunOptions()
        self.on_tick = on_tick
        self.flows: dict[str, FlowState] = {}
        self.events = EventLog(
            lakehouse.event_log_path, pipeline.name, retention=Retention.from_config(config)
        )
        self._stop = threading.Event()
        self._stop_reason = "completed"
        self.validation: Validation | None = None
        self.listener: ProgressListener | None = None

    # -- public

    def request_stop(self, reason: str = "stop requested") -> None:
        """Ask the run to stop after the current micro-batches (thread and signal safe)."""
        self._stop_reason = reason
        self._stop.set()

    def run(self) -> RunResult:
        """Hold the lakehouse's lease for the whole run (a second run is refused)."""
        with Lease.for_lakehouse(
            self.lakehouse, self.events.run_id, self.pipeline.name, on_lost=self.request_stop
        ):
            return self._run()

    def _run(self) -> RunResult:
        validation = validate(self.pipeline, self.lakehouse, self.spark)
        self.validation = validation
        validation.raise_for_problems()
        for warning in validation.warnings:
            log.warning(warning)
        self.events.start()
        self.events.emit(
            "run_start",
            f"{self.options.mode} run of {self.pipeline.name}",
            details={
                "mode": self.options.mode,
                "spark": connect.session_facts(self.spark),
                "graph": validation.graph.as_event(),
                "output_modes": {n: p.output_mode for n, p in validation.flows.items()},
                "warnings": validation.warnings,
            },
        )
        result = RunResult(self.events.run_id)
        listener = self.listener = ProgressListener(
            self.events,
            {
                flow: d.expectations
                for d in self.pipeline.datasets.values()
                for flow in self.pipeline.flow_names(d)
            },
            state_memory.StateSizing.of(lambda key: self.spark.conf.get(key, None)),
        )
        detach = attach(self.spark, listener)
        restore = self._install_signals()
        try:
            if self.options.mode != "backfill":  # a backfill rewrites every table anyway
                self._check_versions(validation)
            self._full_refresh(validation)
            if self.options.mode == "backfill":
                self._backfill(validation)
            else:
                self._prepare(validation)
                listener.flows = set(self.flows)
                listener.sources = {n: s.sources for n, s in self.flows.items()}
                listener.sinks = {
                    n: s.dataset.name for n, s in self.flows.items() if s.dataset.sink
                }
                if self.options.mode == "continuous":
                    self._continuous(validation)
                else:
                    self._triggered(validation)
            result.failed = [n for n, f in self.flows.items() if f.failed]
            result.errors = {n: f.error or "failed" for n, f in self.flows.items() if f.failed}
            result.reason = self._stop_reason if self._stop.is_set() else "completed"
        except BaseException as error:
            failure = explain(error)
            result.reason = str(failure)
            self.events.emit(
                "error",
                str(failure)[:2000],
                level="ERROR",
                details={"error": str(failure), "code": failure.code, "traceback": failure.trace},
            )
            raise
        finally:
            self._stop_all()
            self._release_state()
            restore()
            detach()
            self.events.emit(
                "run_stop",
                f"run stopped: {result.reason}",
                details={"reason": result.reason, "failed": result.failed},
            )
            self.events.close()
        return result

    # -- preparation

    def _outputs(self, validation: Validation) -> list[Dataset]:
        """What the run writes, in dependency order: stored datasets and sinks."""
        datasets = [self.pipeline.datasets[n] for n in validation.order]
        return [d for d in datasets if d.stored or d.sink is not None]

    def _check_versions(self, validation: Validation) -> None:
        flows, tables = guard.lakehouse_flows(self.pipeline, self.lakehouse, validation.sources)
        guard.check_versions(flows, tables, self._refresh_names(validation))

    def _refresh_names(self, validation: Validation) -> list[str]:
        outputs = [d.name for d in self._outputs(validation)]
        names = outputs if self.options.full_refresh_all else list(self.options.full_refresh)
        problems = [
            f"--full-refresh {n}: no such table or sink in this pipeline ({', '.join(outputs)})"
            for n in names
            if n not in outputs
        ]
        if problems:
            raise PipelineError(problems)
        return names

    def _full_refresh(self, validation: Validation) -> None:
        """Reset the chosen tables (``guard.check_versions`` refused to reset a table some other
        flow has read unless that flow goes too)."""
        for name in self._refresh_names(validation):
            self.reset(name)

    def reset(self, name: str) -> None:
        """Delete a table, its side tables (quarantine, late rows, CDC state) and its
        checkpoints; of a sink, its flows' checkpoints (its data stays, as in DLT)."""
        dataset = self.pipeline.datasets[name]
        targets = [name, *dataset.side_tables]
        for target in targets:
            remove_tree(str(self.lakehouse.table_path(target)))
        flows = self.pipeline.flow_names(dataset)
        for flow in flows:
            remove_tree(str(self.lakehouse.checkpoint_path(flow)))
        sink = written_table(self.lakehouse, dataset) if dataset.sink is not None else None
        if sink is not None:  # its flows start over, on purpose: not a lost checkpoint
            guard.forget_flows(sink, flows)
        self.events.emit(
            "flow_stop",
            f"{name}: reset for full refresh",
            flow=name,
            details={"target": name, "reason": "full_refresh"},
        )

    def _prepare(self, validation: Validation) -> None:
        """Real plans in dependency order; every table exists and every guard passes, or
        nothing starts."""
        streams = Evaluator(self.spark, self.pipeline, self.lakehouse, mode="stream")
        batches = Evaluator(self.spark, self.pipeline, self.lakehouse, mode="batch")
        problems: list[str] = []
        private = [d.name for d in self.pipeline.datasets.values() if d.private and d.stored]
        self.lakehouse.set_private_tables(private)
        for dataset in self._outputs(validation):
            if dataset.sink is not None:
                problems.extend(self._prepare_flows(dataset, streams))
                continue
            validated = self._start_as_validated(dataset, validation)
            if validated is not None:
                problems.extend(validated)
                continue
            evaluator = streams if dataset.kind == "table" else batches
            frame = evaluator.evaluate(dataset.name)
            if frame is None:
                problems.append(evaluator.errors.get(dataset.name, f"{dataset.name!r} failed"))
                continue
            plan, choice = check_flow(dataset, frame)
            problems.extend(choice.problems)
            if choice.problems:
                continue
            self._create_if_missing(dataset, frame)
            if dataset.declared:
                problems.extend(self._prepare_flows(dataset, streams))
            elif dataset.kind == "table":
                problems.extend(self._guard(dataset, plan))
                sources = evaluator.sources.get(dataset.name, [])
                self.flows[dataset.name] = FlowState(dataset, plan, frame=frame, sources=sources)
        if problems:
            causes = {**batches.causes, **streams.causes}
            raise PipelineError(problems) from next(iter(causes.values()), None)

    def _start_as_validated(self, dataset: Dataset, validation: Validation) -> list[str] | None:
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
        if dataset.name in self._refresh_names(validation):
            return None
        self._create_if_missing(dataset, frame)
        problems = self._guard(dataset, plan)
        if not problems:
            sources = validation.sources.get(dataset.name, [])
            self.flows[dataset.name] = FlowState(dataset, plan, frame=frame, sources=sources)
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
                problems.extend(self._guard(dataset, plan, flow.name))
                sources = streams.sources.get(flow.name, [])
                state = FlowState(dataset, plan, frame=frame, sources=sources, flow=flow)
                self.flows[flow.name] = state
        return problems

    def _run_once_flows(self, dataset: Dataset) -> None:
        """``once`` flows: a batch append each, recorded in its checkpoint folder so the next
        run skips it; the append is idempotent (``txnAppId``) should the record be lost."""
        for flow in dataset.flows:
            done = self.lakehouse.checkpoint_path(flow.name) / ONCE_DONE
            if not flow.once or done.exists():
                continue
            evaluator = Evaluator(self.spark, self.pipeline, self.lakehouse, mode="batch")
            frame = evaluator.evaluate_flow(flow)
            if frame is None:
                raise PipelineError([evaluator.errors.get(flow.name, f"{flow.name!r} failed")])
            self.write_batch(dataset, frame, once=flow.name)
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(self.events.run_id)
            self.events.emit(
                "flow_stop",
                f"{flow.name} appended once to {dataset.name}",
                flow=flow.name,
                details={"target": dataset.name, "reason": "once"},
            )

    def _run_snapshot_flows(self, dataset: Dataset) -> None:
        """AUTO CDC FROM SNAPSHOT flows: each new snapshot applied once (the function called
        as the flow's own code, so ``lf.read`` resolves; see :mod:`lakefeed.cdc.snapshot`)."""
        target = str(self.lakehouse.table_path(dataset.name))
        side = str(self.lakehouse.table_path(state_table(dataset.name)))
        for flow in dataset.flows:
            if flow.snapshots is None or flow.cdc is None:
                continue
            evaluator = Evaluator(self.spark, self.pipeline, self.lakehouse, mode="batch")
            apply = ApplySnapshots(
                flow.cdc, flow.snapshots, target, side, snapshot_app_id(flow.name)
            )
            with evaluator.inside(flow.name), flow_pool(self.spark, flow.name):
                applied = apply()
            if applied:
                self.events.emit(
                    "flow_stop",
                    f"{flow.name}: snapshot(s) {', '.join(map(str, applied))} applied to "
                    f"{dataset.name}",
                    flow=flow.name,
                    details={"target": dataset.name, "reason": "snapshot", "versions": applied},
                )

    def _create_if_missing(self, dataset: Dataset, frame: DataFrame) -> None:
        """Readers of a table resolve its schema at start: create it empty beforehand.

        A metadata-only Delta commit through delta-rs, so no Spark job (and no Python worker)
        runs before the first real batch.
        """
        path = str(self.lakehouse.table_path(dataset.name))
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
        )

    def _guard(self, dataset: Dataset, plan: FlowPlan, flow: str | None = None) -> list[str]:
        flow = flow or dataset.name
        checkpoint = self.lakehouse.checkpoint_path(flow)
        identity = guard.Identity(self.pipeline.name, flow, dataset.name, plan.facts.stateful)
        refresh = f"lakefeed run PIPELINE --full-refresh {dataset.name}"
        for leftover in clear_interrupted_start(checkpoint):
            log.warning(
                "removed the leftover of an interrupted first batch",
                extra={"flow": flow, "file": str(leftover)},
            )
        try:
            check_checkpoint_files(checkpoint, flow, refresh)
            orphaned = self._orphaned_rows(dataset, flow)
            guard.check(checkpoint, identity, orphaned, sink=dataset.sink is not None)
        except (guard.GuardError, CheckpointError) as error:
            return [str(error)]
        guard.write_identity(checkpoint, identity)
        written = written_table(self.lakehouse, dataset)
        if written is not None and (dataset.declared or dataset.sink is not None):
            guard.record_flow(written, flow)
        return []

    def _orphaned_rows(self, dataset: Dataset, flow: str) -> bool:
        return orphaned_rows(self.pipeline, self.lakehouse, dataset, flow)

    # -- streaming

    def _start(self, state: FlowState, trigger: dict) -> StreamingQuery:
        dataset = state.dataset
        if state.attempts:  # a restart: its files may have been damaged since the first guard
            check_checkpoint_files(
                self.lakehouse.checkpoint_path(state.name),
                state.name,
                f"lakefeed run PIPELINE --full-refresh {dataset.name}",
            )
        frame, state.frame = state.frame, None
        if frame is None:
            evaluator = Evaluator(self.spark, self.pipeline, self.lakehouse, mode="stream")
            flow = state.flow
            frame = evaluator.evaluate_flow(flow) if flow else evaluator.evaluate(dataset.name)
        if frame is None:
            raise RuntimeError(f"{state.name!r} could not be evaluated")
        rules = dataset.expectations
        checked = expect.with_flags(frame, rules, dataset.name)
        checkpoint = str(self.lakehouse.checkpoint_path(state.name))
        sink = dataset.sink
        target = sink.describe() if sink else str(self.lakehouse.table_path(dataset.name))
        mode = state.plan.output_mode or "append"
        with (
            flow_pool(self.spark, state.name),
            starting(
                self.spark, state.plan.facts, trigger, self.pipeline.spark_conf_of(state.name)
            ),
        ):
            query = connect.start_query(
                lambda: self._write_stream(checked, state, mode, checkpoint, target, trigger)
            )
        self.events.emit(
            "flow_start",
            f"{state.name} started ({mode}, {trigger})",
            flow=state.name,
            details={
                "checkpoint": checkpoint,
                "target": target,
                "attempt": state.attempts,
                "output_mode": mode,
                "sources": [registry.describe(fmt, opts) for fmt, opts in state.sources],
                **({"sink": dataset.name} if sink else {}),
            },
        )
        state.query = query
        return query

    def _write_stream(
        self,
        checked: DataFrame,
        state: FlowState,
        mode: str,
        checkpoint: str,
        target: str,
        trigger: dict,
    ) -> StreamingQuery:
        dataset = state.dataset
        if dataset.sink is not None:
            query = SinkQuery(dataset.name, dataset.sink, state.name, checkpoint, mode, trigger)
            return query.start(checked, self.lakehouse)
        rules = dataset.expectations
        writer = self._batch_writer(state, mode, checkpoint, target)
        if writer is None:
            return delta.write_stream(
                checked.drop(*expect.flag_columns(rules)),
                target,
                checkpoint,
                output_mode=mode,
                partition_by=dataset.partition_cols,
                query_name=state.name,
                trigger=trigger,
                mergeSchema="true",
            )
        # the quarantine writer splits on the rule flags; every other body gets plain rows
        split = dataset.quarantine and (state.flow is None or state.flow.cdc is None)
        rows = checked if split else checked.drop(*expect.flag_columns(rules))
        return (
            stop_aware(rows.writeStream, writer)
            .queryName(state.name)
            .outputMode(mode)
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start()
        )

    def _batch_writer(
        self, state: FlowState, mode: str, checkpoint: str, target: str
    ) -> Callable[[DataFrame, int], None] | None:
        """The ``foreachBatch`` body of a flow that needs one; None: the Delta stream sink."""
        dataset = state.dataset
        cdc = state.flow.cdc if state.flow is not None else None
        writer: Callable[[DataFrame, int], None] | None = None
        table = expect.TableWriter(target, checkpoint, dataset.partition_cols, mode)
        if cdc is not None:
            side = str(self.lakehouse.table_path(state_table(dataset.name)))
            writer = ApplyChanges(cdc, target, side, checkpoint)
        elif dataset.quarantine:
            quarantine = str(self.lakehouse.table_path(dataset.quarantine))
            writer = expect.QuarantineWriter(table, dataset.expectations, quarantine)
        elif dataset.keys:
            writer = KeyedUpsert(target, dataset.keys, checkpoint)
        if dataset.late_table is None:
            return writer
        return LateRowsWriter(
            writer or table,
            str(self.lakehouse.table_path(dataset.late_table)),
            checkpoint,
            dataset.name,
            self.events,
        )

    def _triggered(self, validation: Validation) -> None:
        trigger = {"once": True} if self.options.mode == "once" else {"availableNow": True}
        for dataset in self._outputs(validation):
            if self._stop.is_set():
                break
            if dataset.kind == "materialized_view":
                self.refresh_view(dataset)
                continue
            self._run_once_flows(dataset)
            self._run_snapshot_flows(dataset)
            for state in self._states(dataset):
                if not self._until_done(state, trigger):
                    return  # stopping: _stop_all lets the running batch finish

    def _states(self, dataset: Dataset) -> list[FlowState]:
        """The streaming flows writing ``dataset`` (one, or its append flows)."""
        names = self.pipeline.flow_names(dataset)
        return [self.flows[name] for name in names if name in self.flows]

    def _until_done(self, state: FlowState, trigger: dict) -> bool:
        """Run one flow to its end, restarting on failure; False when the run is stopping."""
        while True:
            query = self._start(state, trigger)
            self._await(query)
            if self._stop.is_set():
                return False
            if self._finished(state):
                self._compactor([state]).check()  # the query is done: nothing to block
                return True
            if state.failed:
                raise PipelineError(
                    [f"flow {state.name!r} failed: {state.error}; downstream flows were not run"]
                )
            self._sleep_until(state.restart_at or 0)

    def _await(self, query: StreamingQuery) -> None:
        """Wait for the query to end; its error, if any, is handled by ``_finished``."""
        while query.isActive and not self._stop.is_set():
            with contextlib.suppress(StreamingQueryException):
                query.awaitTermination(1)
            self._tick()

    def _continuous(self, validation: Validation) -> None:
        trigger = {"processingTime": self.options.trigger_interval}
        for dataset in self._outputs(validation):
            if dataset.declared:
                self._run_once_flows(dataset)
                self._run_snapshot_flows(dataset)
        for state in self.flows.values():
            _settle(self._start(state, trigger))
        compactor = self._compactor(self.flows.values()).start()
        try:
            self._supervise(validation, trigger)
        finally:
            compactor.stop()

    def _compactor(self, flows: Iterable[FlowState]) -> AutoCompactor:
        """Compacts the flows' tables (and side tables): in the background while they run, or
        once after a triggered flow ended."""
        stored = [s.dataset for s in flows if s.dataset.stored]
        names = [n for d in stored for n in (d.name, *d.side_tables)]
        paths = [str(self.lakehouse.table_path(n)) for n in names]
        policy = Policy.from_conf(lambda key: self.spark.conf.get(key, None))
        return AutoCompactor(paths, policy, self.options.compact_interval)

    def _supervise(self, validation: Validation, trigger: dict) -> None:
        deadline = time.monotonic() + self.options.duration if self.options.duration else None
        next_refresh = time.monotonic() + self.options.refresh_interval
        views = [d for d in self._outputs(validation) if d.kind == "materialized_view"]
        snapshots = [d for d in self._outputs(validation) if any(f.snapshots for f in d.flows)]
        while not self._stop.is_set():
            self._stop.wait(0.5)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                self.request_stop("duration reached")
                break
            for state in self.flows.values():
                if state.query is not None and not state.query.isActive:
                    self._finished(state)
                elif state.query is not None and state.attempts and state.query.lastProgress:
                    state.attempts = 0  # it recovered: later failures get a fresh budget
                if state.restart_at is not None and now >= state.restart_at:
                    state.restart_at = None
                    self._restart(state, trigger)
            if self.flows and all(s.failed for s in self.flows.values()):
                self.request_stop("every flow failed")
            if (views or snapshots) and now >= next_refresh:
                self._refresh(snapshots, views)
                next_refresh = now + self.options.refresh_interval
            self._tick()
        self._stop_all()
        self._refresh(snapshots, views)

    def _refresh(self, snapshots: list[Dataset], views: list[Dataset]) -> None:
        """What a continuous run redoes every ``refresh_interval``: new snapshots of snapshot
        flows, then materialized views (which may read their targets)."""
        for dataset in snapshots:
            self._run_snapshot_flows(dataset)
        for view in views:
            self.refresh_view(view)

    def _backoff(self, state: FlowState) -> float:
        return min(self.options.restart_backoff * 2**state.attempts, self.options.max_backoff)

    def _restart(self, state: FlowState, trigger: dict) -> None:
        """A restart that cannot even start (e.g. the source is still down) counts as a failure
        of the flow, never of the whole run."""
        try:
            self._start(state, trigger)
        except Exception as error:
            self._failed(state, explain(error), "could not restart")

    def _finished(self, state: FlowState) -> bool:
        """Handle a query that ended: True if it ended cleanly, else schedule a restart."""
        query = state.query
        assert query is not None
        self._catch_up(query)
        error = query.exception()
        state.query = None
        name, target = state.name, state.dataset.name
        if error is None:
            self.events.emit("flow_stop", f"{name} stopped", flow=name, details={"target": target})
            return True
        self._failed(state, explain(error), "failed")
        return False

    def _failed(self, state: FlowState, failure: Failure, what: str) -> None:
        """Record a flow's failure; restart it with backoff unless its error is permanent (its
        code says retrying cannot help) or its restarts are used up. One log line each time."""
        name = state.name
        state.error = str(failure)
        self.events.emit(
            "flow_failed",
            f"{name} {what}: {failure}",
            flow=name,
            level="ERROR",
            details={
                "error": str(failure),
                "code": failure.code,
                "permanent": failure.permanent,
                "traceback": failure.trace,
            },
        )
        if failure.permanent or state.attempts >= self.options.max_restarts:
            state.failed = True
            why = "permanent error, not retried" if failure.permanent else "no restarts left"
            log.error(f"flow {name!r} {what}: {failure} ({why})")
            return
        delay = self._backoff(state)
        state.attempts += 1
        state.restart_at = time.monotonic() + delay
        log.warning(
            f"flow {name!r} {what}: {failure}; "
            f"restart {state.attempts}/{self.options.max_restarts} in {delay:.1f}s"
        )
        self.events.emit(
            "flow_restart",
            f"{name}: restart {state.attempts}/{self.options.max_restarts} in {delay:.1f}s",
            flow=name,
            details={
                "attempt": state.attempts,
                "delay_s": delay,
                "checkpoint": str(self.lakehouse.checkpoint_path(name)),
                "target": state.dataset.name,
            },
        )

    def _sleep_until(self, when: float) -> None:
        while time.monotonic() < when and not self._stop.is_set():
            self._stop.wait(0.2)

    def _stop_all(self) -> None:
        """Stop every running query once the batch it is running, if any, has ended; within
        ``stop_timeout`` in all. The queries are waited for side by side, each stopped right at
        its own batch end (waiting for one after another, a later query would have begun its
        next batch by then): the stop takes the longest batch, not their sum."""
        running = [
            (s, q, self._batch_end(q)) for s in self.flows.values() if (q := s.query) is not None
        ]
        deadline = time.monotonic() + self.options.stop_timeout
        if running:
            with ThreadPoolExecutor(len(running), thread_name_prefix="lakefeed-stop") as pool:
                list(pool.map(lambda r: _graceful_stop(r[1], deadline, r[2]), running))
        for state, query, _ in running:
            self._catch_up(query)
            state.query = None
            self.events.emit(
                "flow_stop",
                f"{state.name} stopped",
                flow=state.name,
                details={"target": state.dataset.name},
            )

    def _batch_end(self, query: StreamingQuery) -> Callable[[float], bool]:
        """Waits (up to its argument, in s) for the end of the batch ``query`` runs now: any
        batch after its last progress (which the query sets before the listener hears it)."""
        listener = self.listener
        assert listener is not None  # set before any query starts
        run_id, last = str(query.runId), query.lastProgress
        done = int(last["batchId"]) if last is not None else -1
        return lambda timeout: listener.wait_batch_end(run_id, done, timeout)

    def _release_state(self) -> None:
        """Close the stopped queries' state stores now, not at Spark's next maintenance
        (:func:`lakefeed.runtime.state_memory.release`)."""
        try:
            state_memory.release(self.spark)
        except Exception:  # the run's outcome stands; Spark's maintenance closes them later
            log.exception("could not close the state stores of the stopped queries")

    def _catch_up(self, query: StreamingQuery) -> None:
        if self.listener is not None:
            try:
                self.listener.catch_up(query)
            except Exception:  # observability must never fail the run
                log.exception("could not record the last progress of a flow")

    def _tick(self) -> None:
        if self.on_tick is not None:
            try:
                self.on_tick(self)
            except Exception:
                log.exception("progress view failed")

    # -- batch

    def refresh_view(self, dataset: Dataset) -> None:
        """Recompute a materialized view (or backfill a table) in batch, replacing it."""
        evaluator = Evaluator(self.spark, self.pipeline, self.lakehouse, mode="batch")
        frame = evaluator.evaluate(dataset.name)
        if frame is None:
            raise PipelineError([evaluator.errors.get(dataset.name, dataset.name)])
        with flow_pool(self.spark, dataset.name):
            self.write_batch(dataset, frame)
        sources = evaluator.sources.get(dataset.name, [])
        report_skipped_files(self.events, dataset.name, sources, None)

    def write_batch(self, dataset: Dataset, frame: DataFrame, once: str | None = None) -> None:
        """Replace the table with ``frame``; or, for the ``once`` flow so named, append it."""
        rules = dataset.expectations
        observation = Observation("lakefeed_expectations_batch")
        checked = expect.with_flags(frame, rules, dataset.name, observation)
        target = str(self.lakehouse.table_path(dataset.name))
        flow = once or dataset.name
        checked.persist()
        try:
            with flow_conf(self.spark, self.pipeline.spark_conf_of(flow), flow):
                if dataset.schema is not None and not delta_table.exists(target):
                    create_declared(target, dataset)
                keep = dataset.schema is not None  # the declared schema stays the table's
                rows = expect.kept_rows(checked, rules)
                _save(rows, target, dataset.partition_cols, once, keep_schema=keep)
                delta_table.describe(target, dataset.comment, dataset.table_properties)
                if dataset.quarantine:
                    quarantine = str(self.lakehouse.table_path(dataset.quarantine))
                    _save(expect.dropped_rows(checked, rules), quarantine, [], once)
        finally:
            checked.unpersist()
        if rules:
            self.events.emit(
                "expectations",
                f"{dataset.name}: expectations checked (batch)",
                flow=dataset.name,
                details=expectation_event(dataset.name, rules, None, observation.get),
            )

    def _backfill(self, validation: Validation) -> None:
        for dataset in self._outputs(validation):
            if self._stop.is_set():
                break
            if dataset.sink is not None:
                log.warning(f"sink {dataset.name!r} is written by streaming runs only: skipped")
                continue
            if dataset.cdc_state:
                self._backfill_cdc(dataset)
            else:
                self.refresh_view(dataset)
            for flow in self.pipeline.flow_names(dataset) if dataset.kind == "table" else ():
                remove_tree(str(self.lakehouse.checkpoint_path(flow)))
            self.events.emit(
                "flow_stop",
                f"{dataset.name} backfilled",
                flow=dataset.name,
                details={"target": dataset.name, "reason": "backfill"},
            )

    def _backfill_cdc(self, dataset: Dataset) -> None:
        """An AUTO CDC target rebuilt from all of its sources' changes, each flow's as one
        batch into emptied tables (its own txn app id, so a rerun after a crash is a no-op)."""
        assert dataset.cdc_state is not None
        target = self.lakehouse.table_path(dataset.name)
        side = self.lakehouse.table_path(dataset.cdc_state)
        for path in (target, side):
            remove_tree(str(path))
        evaluator = Evaluator(self.spark, self.pipeline, self.lakehouse, mode="batch")
        shaped = evaluator.evaluate(dataset.name)
        if shaped is None:
            raise PipelineError(list(evaluator.errors.values()) or [dataset.name])
        self._create_if_missing(dataset, shaped)
        self._run_snapshot_flows(dataset)  # tables emptied: every snapshot again, from None
        for flow in dataset.flows:
            if flow.snapshots is not None:
                continue
            frame = evaluator.evaluate_flow(flow)
            if frame is None or flow.cdc is None:
                raise PipelineError(list(evaluator.errors.values()) or [flow.name])
            apply = ApplyChanges(flow.cdc, str(target), str(side), None, f"backfill-{flow.name}")
            with flow_pool(self.spark, flow.name):
                apply(frame, 0)

    # -- signals

    def _install_signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {
            sig: signal.signal(sig, lambda s, _f: self.request_stop(signal.Signals(s).name))
            for sig in (signal.SIGINT, signal.SIGTERM)
        }

        restore_jvm = _jvm_ignores_sigterm(self.spark)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            restore_jvm()

        return restore


def _jvm_ignores_sigterm(spark: SparkSession) -> Callable[[], None]:
    """Keep Spark's JVM alive through a SIGTERM while this process stops the run itself.

    A service manager (systemd's default ``KillMode``, ``timeout``, ``kill -- -pgid``) sends
    SIGTERM to the whole process group: the JVM would run its shutdown hooks and exit under the
    queries this process is stopping, and every Py4J call after that fails with a traceback.
    pyspark already keeps SIGINT (Ctrl+C) from the JVM; this does the same for SIGTERM, for the
    length of the run. The JVM still ends with this process (pyspark's gateway exits when its
    parent's pipe closes) and on SIGKILL. Returns the function that puts Java's handler back.
    """
    jvm = getattr(spark, "_jvm", None)  # classic sessions only: Connect's server is its own
    if jvm is None:
        return lambda: None
    term = jvm.sun.misc.Signal("TERM")
    previous = jvm.sun.misc.Signal.handle(term, jvm.sun.misc.SignalHandler.SIG_IGN)
    return lambda: jvm.sun.misc.Signal.handle(term, previous)


def _save(
    frame: DataFrame,
    path: str,
    partition_cols: list[str],
    once: str | None,
    keep_schema: bool = False,
) -> None:
    """Overwrite, or append as once-flow ``once`` (idempotent: one Delta txn per flow); the
    query's schema becomes the table's unless ``keep_schema`` (a declared schema)."""
    evolve = str(not keep_schema).lower()
    if once is None:
        delta.write(
            frame, path, mode="overwrite", partition_by=partition_cols, overwriteSchema=evolve
        )
    else:
        delta.write(
            frame,
            path,
            mode="append",
            partition_by=partition_cols,
            mergeSchema=evolve,
            txnAppId=f"lakefeed-once-{once}",
            txnVersion="0",
        )


def _settle(query: StreamingQuery, timeout: float = 30.0) -> None:
    """Wait until a query has initialised its sources before starting the next one: each start
    spawns Python workers, and starting all at once on a busy machine makes them miss Spark's
    connect-back timeout."""
    deadline = time.monotonic() + timeout
    while query.isActive and time.monotonic() < deadline:
        if query.status.get("message") != "Initializing sources":
            return
        time.sleep(0.2)


def _graceful_stop(
    query: StreamingQuery, deadline: float, batch_ended: Callable[[float], bool]
) -> None:
    """Let the running micro-batch commit, then stop (Spark has no stop-after-batch call).

    It stops when no trigger is active or when the batch that was running has ended (its
    progress event: batch and commit log written). Waiting for an idle moment alone could
    take ``stop_timeout`` whole: a query whose batches outlast their trigger interval starts
    the next at once. That next batch, if it has begun, is interrupted by ``stop()`` like a
    kill would interrupt it: the next start replays it, exactly once.
    """
    while query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive", False) or batch_ended(0.1):
            break
    query.stop()


def run_pipeline(
    pipeline: Pipeline,
    lakehouse: Lakehouse,
    spark: SparkSession,
    options: RunOptions | None = None,
) -> RunResult:
    return PipelineRunner(pipeline, lakehouse, spark, options).run()
