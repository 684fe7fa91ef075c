"""What every part of a run shares: its options, its flows' states and its stop flag.

A part gets a :class:`RunContext`, not the runner, so that it reads (and changes) only this
shared state and can be read without the parts beside it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.logs import get_logger
from lakefeed.pipeline.api import AppendFlow, Dataset, Pipeline
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.kinds import RunMode, choices
from lakefeed.runtime.evaluate import Evaluator
from lakefeed.runtime.event_log import EventLog
from lakefeed.runtime.listener import ProgressListener
from lakefeed.runtime.validate import FlowPlan, Validation

log = get_logger(__name__)

MODES = tuple(choices(RunMode))
ONCE_DONE = "_lakefeed_once_done"  # in a once flow's checkpoint folder: it has run


@dataclass
class RunOptions:
    """How to run: the mode and its timings (``lakefeed run``'s options)."""

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
    """One streaming flow of the run: its plan, its query while it runs, its failures."""

    dataset: Dataset
    plan: FlowPlan
    query: StreamingQuery | None = None
    attempts: int = 0
    restart_at: float | None = None
    failed: bool = False
    error: str | None = None  # the last failure, as a user reads it
    frame: DataFrame | None = None  # evaluated by the preparation; a restart evaluates afresh
    sources: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    flow: AppendFlow | None = None  # an append flow into ``dataset``, else its own query

    @property
    def name(self) -> str:
        """The flow's name: its query, checkpoint and event-log name."""
        return self.flow.name if self.flow is not None else self.dataset.name


class StopFlag:
    """Whether, and why, the run is stopping: set by a signal, the lease's watchdog, the
    duration or a caller, read by every loop of the run (thread and signal safe)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = "completed"

    def request(self, reason: str) -> None:
        self.reason = reason
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` s; True at once when the run is stopping."""
        return self._event.wait(timeout)


@dataclass
class RunContext:
    """The run's shared state; ``flows`` is filled by the preparation and is the dict the
    runner shows (``PipelineRunner.flows``), so it is changed in place, never replaced."""

    pipeline: Pipeline
    lakehouse: Lakehouse
    spark: SparkSession
    options: RunOptions
    events: EventLog
    stop: StopFlag
    tick: Callable[[], None]  # the caller's progress hook, called while the run waits
    flows: dict[str, FlowState] = field(default_factory=dict)
    listener: ProgressListener | None = None  # attached before any query starts

    def evaluator(self, mode: str) -> Evaluator:
        """A fresh evaluator of the pipeline's functions (``"stream"`` or ``"batch"``)."""
        return Evaluator(self.spark, self.pipeline, self.lakehouse, mode=mode)

    def table(self, name: str) -> str:
        return str(self.lakehouse.table_path(name))

    def outputs(self, validation: Validation) -> list[Dataset]:
        """What the run writes, in dependency order: stored datasets and sinks."""
        datasets = [self.pipeline.datasets[n] for n in validation.order]
        return [d for d in datasets if d.stored or d.sink is not None]

    def states(self, dataset: Dataset) -> list[FlowState]:
        """The streaming flows writing ``dataset`` (one, or its append flows)."""
        names = self.pipeline.flow_names(dataset)
        return [self.flows[name] for name in names if name in self.flows]

    def catch_up(self, query: StreamingQuery) -> None:
        """Record the last progress of an ended query, which its listener may not have heard."""
        if self.listener is not None:
            try:
                self.listener.catch_up(query)
            except Exception:  # observability must never fail the run
                log.exception("could not record the last progress of a flow")
