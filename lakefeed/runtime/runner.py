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

:class:`PipelineRunner` holds the run together: the lease, validation, the event log, the
progress listener, signals, and the result. The work itself is done by the parts in
:mod:`lakefeed.runtime.run`: a full refresh, then the mode's strategy (which prepares, starts,
supervises and stops the flows), each part readable alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pyspark.sql import SparkSession

from lakefeed.core.explain import explain
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.logs import get_logger
from lakefeed.pipeline.api import Pipeline, config
from lakefeed.runtime import state_memory
from lakefeed.runtime.event_log import EventLog, Retention
from lakefeed.runtime.lease import Lease
from lakefeed.runtime.listener import ProgressListener, attach
from lakefeed.runtime.results import RunResult
from lakefeed.runtime.run import signals
from lakefeed.runtime.run.checkpoints import orphaned_rows
from lakefeed.runtime.run.context import (
    MODES,
    ONCE_DONE,
    FlowState,
    RunContext,
    RunOptions,
    StopFlag,
)
from lakefeed.runtime.run.modes import for_mode
from lakefeed.runtime.run.outcome import run_result, versions_before
from lakefeed.runtime.run.refresh import FullRefresh
from lakefeed.runtime.run.stopping import release_state, stop_all
from lakefeed.runtime.validate import Validation, validate
from lakefeed.spark import connect

# Their home moved to lakefeed.runtime.run; importable from here as before.
__all__ = [
    "MODES",
    "ONCE_DONE",
    "FlowState",
    "PipelineRunner",
    "RunOptions",
    "orphaned_rows",
    "run_pipeline",
]

log = get_logger(__name__)


class PipelineRunner:
    """One run of a pipeline on a lakehouse: ``run()`` once, ``request_stop()`` from anywhere.

    ``on_tick`` is called with the runner while the run waits (a progress view reads
    ``flows``); its errors are logged, never raised.
    """

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
        self.events = EventLog(
            lakehouse.event_log_path, pipeline.name, retention=Retention.from_config(config)
        )
        self._stop = StopFlag()
        self._lease_lost = False
        self.context = RunContext(
            pipeline, lakehouse, spark, self.options, self.events, self._stop, self._tick
        )
        self.flows: dict[str, FlowState] = self.context.flows
        self.validation: Validation | None = None

    def request_stop(self, reason: str = "stop requested") -> None:
        """Ask the run to stop after the current micro-batches (thread and signal safe)."""
        self._stop.request(reason)

    def lease_taken_over(self, reason: str) -> None:
        """The heartbeat found another run holding the lease: stop, and say so in the result."""
        self._lease_lost = True
        self.request_stop(reason)

    def run(self) -> RunResult:
        """Hold the lakehouse's lease for the whole run (a second run is refused)."""
        with Lease.for_lakehouse(
            self.lakehouse, self.events.run_id, self.pipeline.name, on_lost=self.lease_taken_over
        ):
            return replace(self._run(), lease_lost=self._lease_lost)

    def _run(self) -> RunResult:
        before = versions_before(self.context)
        validation = self._validate()
        self.events.start()
        self._emit_start(validation)
        self.context.listener = self._listener()
        detach = attach(self.spark, self.context.listener)
        restore = signals.install(self.spark, self.request_stop)
        reason = "completed"
        try:
            self._run_mode(validation)
            reason = self._stop.reason if self._stop.is_set() else "completed"
        except BaseException as error:
            reason = self._report(error)
            raise
        finally:
            stop_all(self.context)
            release_state(self.spark)
            restore()
            detach()
            self._emit_stop(reason)
        return run_result(self.context, validation, reason, before)

    def _validate(self) -> Validation:
        """The whole pipeline checked before anything is written; its warnings logged."""
        validation = validate(self.pipeline, self.lakehouse, self.spark)
        self.validation = validation
        validation.raise_for_problems()
        for warning in validation.warnings:
            log.warning(warning)
        return validation

    def _emit_start(self, validation: Validation) -> None:
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

    def _listener(self) -> ProgressListener:
        """The progress listener, knowing each flow's expectations and how to size state."""
        expectations = {
            flow: d.expectations
            for d in self.pipeline.datasets.values()
            for flow in self.pipeline.flow_names(d)
        }
        sizing = state_memory.StateSizing.of(lambda key: self.spark.conf.get(key, None))
        return ProgressListener(self.events, expectations, sizing)

    def _run_mode(self, validation: Validation) -> None:
        """The full refresh first (after the version guard), then the mode's strategy."""
        mode = for_mode(self.context)
        refresh = FullRefresh(self.context)
        if mode.checks_versions:
            refresh.check_versions(validation)
        mode.run_flows(validation, refresh.apply(validation))

    def _report(self, error: BaseException) -> str:
        """Log the error that ended the run in the event log; returns it as the reason."""
        failure = explain(error)
        self.events.emit(
            "error",
            str(failure)[:2000],
            level="ERROR",
            details={"error": str(failure), "code": failure.code, "traceback": failure.trace},
        )
        return str(failure)

    def _emit_stop(self, reason: str) -> None:
        failed = [n for n, f in self.flows.items() if f.failed]
        self.events.emit(
            "run_stop",
            f"run stopped: {reason}",
            details={"reason": reason, "failed": failed},
        )
        self.events.close()

    def _tick(self) -> None:
        if self.on_tick is not None:
            try:
                self.on_tick(self)
            except Exception:
                log.exception("progress view failed")


def run_pipeline(
    pipeline: Pipeline,
    lakehouse: Lakehouse,
    spark: SparkSession,
    options: RunOptions | None = None,
) -> RunResult:
    return PipelineRunner(pipeline, lakehouse, spark, options).run()
