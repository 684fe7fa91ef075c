"""One strategy per run mode (see :mod:`lakefeed.runtime.runner` for what each does), run once
the tables a full refresh names are reset:

- :class:`Continuous`: every flow at once, supervised, until stopped or ``duration``;
- :class:`AvailableNow` and :class:`Once`: flow by flow in dependency order, each to its end;
- :class:`Backfill`: the functions as batch DataFrames, replacing every table.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable
from typing import ClassVar

from lakefeed.core.logs import get_logger
from lakefeed.core.storage import remove_tree
from lakefeed.pipeline.api import Dataset
from lakefeed.pipeline.kinds import RunMode
from lakefeed.runtime.compaction import AutoCompactor, Policy
from lakefeed.runtime.run.batch import BatchWrites
from lakefeed.runtime.run.context import FlowState, RunContext
from lakefeed.runtime.run.prepare import Preparer
from lakefeed.runtime.run.starter import FlowStarter, settle
from lakefeed.runtime.run.stopping import stop_all
from lakefeed.runtime.run.supervisor import Supervisor
from lakefeed.runtime.run.writers import SinkBuilder
from lakefeed.runtime.validate import Validation

log = get_logger(__name__)


class Mode(ABC):
    """How a run writes its outputs once its full refresh is done."""

    checks_versions: ClassVar[bool] = True  # refuse tables changed under their readers

    def __init__(self, run: RunContext, batch: BatchWrites) -> None:
        self.run = run
        self.batch = batch

    @abstractmethod
    def run_flows(self, validation: Validation, refreshed: Collection[str]) -> None:
        """Write every output; ``refreshed``: the tables the full refresh has just reset."""


class Backfill(Mode):
    """Each output recomputed in batch over all data; the flows' checkpoints are removed, as
    their offsets no longer describe the table (the next streaming run needs a full refresh)."""

    checks_versions = False  # a backfill rewrites every table anyway

    def run_flows(self, validation: Validation, refreshed: Collection[str]) -> None:
        run = self.run
        for dataset in run.outputs(validation):
            if run.stop.is_set():
                break
            if dataset.sink is not None:
                log.warning(f"sink {dataset.name!r} is written by streaming runs only: skipped")
                continue
            if dataset.cdc_state:
                self.batch.backfill_cdc(dataset)
            else:
                self.batch.refresh_view(dataset)
            for flow in run.pipeline.flow_names(dataset) if dataset.kind == "table" else ():
                remove_tree(str(run.lakehouse.checkpoint_path(flow)))
            run.events.emit(
                "flow_stop",
                f"{dataset.name} backfilled",
                flow=dataset.name,
                details={"target": dataset.name, "reason": "backfill"},
            )


class Streaming(Mode):
    """The modes whose flows run as streaming queries: every flow is prepared before any
    starts, then the mode runs them."""

    def __init__(
        self,
        run: RunContext,
        batch: BatchWrites,
        prepare: Preparer,
        starter: FlowStarter,
        supervisor: Supervisor,
    ) -> None:
        super().__init__(run, batch)
        self.prepare = prepare
        self.starter = starter
        self.supervisor = supervisor

    def run_flows(self, validation: Validation, refreshed: Collection[str]) -> None:
        self.prepare.prepare(validation, refreshed)
        self._introduce_flows()
        self.stream(validation)

    def _introduce_flows(self) -> None:
        """Tell the progress listener which queries are the run's, what they read and which
        write a sink (its event log names them so)."""
        run = self.run
        listener = run.listener
        assert listener is not None  # attached before the mode runs
        listener.flows = set(run.flows)
        listener.sources = {n: s.sources for n, s in run.flows.items()}
        listener.sinks = {n: s.dataset.name for n, s in run.flows.items() if s.dataset.sink}

    @abstractmethod
    def stream(self, validation: Validation) -> None:
        """Run the prepared flows."""


class Triggered(Streaming):
    """Flow by flow in dependency order, each to its end with a restart budget; a flow that
    fails for good stops the run before the flows reading it."""

    trigger: ClassVar[dict]

    def stream(self, validation: Validation) -> None:
        run = self.run
        for dataset in run.outputs(validation):
            if run.stop.is_set():
                break
            if dataset.kind == "materialized_view":
                self.batch.refresh_view(dataset)
                continue
            self.batch.once_flows(dataset)
            self.batch.snapshot_flows(dataset)
            for state in run.states(dataset):
                if not self.supervisor.run_to_end(state, self.trigger):
                    return  # stopping: the runner stops the query once its batch has ended
                compactor(run, [state]).check()  # the query is done: nothing to block


class AvailableNow(Triggered):
    """Everything present, in rate-limited batches, then stop."""

    trigger: ClassVar[dict] = {"availableNow": True}


class Once(Triggered):
    """One micro-batch per flow (which ignores rate limits such as ``maxFilesPerTrigger``)."""

    trigger: ClassVar[dict] = {"once": True}


class Continuous(Streaming):
    """Every flow at once until a stop or ``duration``; materialized views and snapshot flows
    are redone every ``refresh_interval`` and once more at the end."""

    def stream(self, validation: Validation) -> None:
        run = self.run
        trigger = {"processingTime": run.options.trigger_interval}
        for dataset in run.outputs(validation):
            if dataset.declared:
                self.batch.once_flows(dataset)
                self.batch.snapshot_flows(dataset)
        for state in run.flows.values():
            settle(self.starter.start(state, trigger))
        background = compactor(run, run.flows.values()).start()
        try:
            self._supervise(validation, trigger)
        finally:
            background.stop()

    def _supervise(self, validation: Validation, trigger: dict) -> None:
        run, options = self.run, self.run.options
        deadline = time.monotonic() + options.duration if options.duration else None
        next_refresh = time.monotonic() + options.refresh_interval
        outputs = run.outputs(validation)
        views = [d for d in outputs if d.kind == "materialized_view"]
        snapshots = [d for d in outputs if any(f.snapshots for f in d.flows)]
        while not run.stop.is_set():
            run.stop.wait(0.5)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                run.stop.request("duration reached")
                break
            self.supervisor.watch(now, trigger)
            if run.flows and all(s.failed for s in run.flows.values()):
                run.stop.request("every flow failed")
            if (views or snapshots) and now >= next_refresh:
                self._refresh(snapshots, views)
                next_refresh = now + options.refresh_interval
            run.tick()
        stop_all(run)
        self._refresh(snapshots, views)

    def _refresh(self, snapshots: list[Dataset], views: list[Dataset]) -> None:
        """What a continuous run redoes every ``refresh_interval``: new snapshots of snapshot
        flows, then materialized views (which may read their targets)."""
        for dataset in snapshots:
            self.batch.snapshot_flows(dataset)
        for view in views:
            self.batch.refresh_view(view)


def compactor(run: RunContext, flows: Iterable[FlowState]) -> AutoCompactor:
    """Compacts the flows' tables (and side tables): in the background while they run, or
    once after a triggered flow ended."""
    stored = [s.dataset for s in flows if s.dataset.stored]
    names = [n for d in stored for n in (d.name, *d.side_tables)]
    paths = [run.table(n) for n in names]
    policy = Policy.from_conf(lambda key: run.spark.conf.get(key, None))
    return AutoCompactor(paths, policy, run.options.compact_interval)


STREAMING: dict[str, type[Streaming]] = {
    RunMode.CONTINUOUS: Continuous,
    RunMode.AVAILABLE_NOW: AvailableNow,
    RunMode.ONCE: Once,
}


def for_mode(run: RunContext) -> Mode:
    """The strategy of ``run.options.mode``, built with the parts it needs."""
    batch = BatchWrites(run)
    if run.options.mode == RunMode.BACKFILL:
        return Backfill(run, batch)
    starter = FlowStarter(run, SinkBuilder(run))
    strategy = STREAMING[run.options.mode]
    return strategy(run, batch, Preparer(run), starter, Supervisor(run, starter))
