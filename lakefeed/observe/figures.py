"""Per-flow figures folded from event-log events.

The web UI's JSON API, ``/metrics`` and ``lakefeed status``/``events`` all read a pipeline
through :class:`Monitor`, so the three always show the same numbers. It is a pure fold over
events (no Spark, no I/O): feed it events oldest first with :meth:`Monitor.apply`, in one go for
the CLI or incrementally as new event-log files appear for the live UI.

Definitions (each from one ``flow_progress``, i.e. Spark's ``StreamingQueryProgress``):

- *batch duration*: ``durationMs.triggerExecution``.
- *end-to-end latency*: the runtime's ``lakefeed.e2e_latency_ms`` when it measured one, else the
  time from the newest event time of the batch (``eventTime.max``) to the batch commit
  (trigger ``timestamp`` + batch duration): how far the flow's output trails its input.
- *watermark delay*: batch ``timestamp`` − ``eventTime.watermark`` (Spark's initial epoch-0
  watermark counts as "none yet").
- *state rows / memory / rows dropped as late*: sums over ``stateOperators``; rows kept as late
  (``late_rows="keep"``) from ``late_rows`` events (Spark counts them nowhere: they leave
  before the stateful operator).
- *Kafka lag*: ``lakefeed.kafka_lag`` when the runtime put it there, else the sum over the
  sources of the ``kafka_lag`` figure their connectors read from the progress
  (:func:`lakefeed.connectors.registry.progress_figures`).
- *backpressure*: input rate above processing rate (by more than :data:`BACKPRESSURE_MARGIN`)
  for :data:`BACKPRESSURE_BATCHES` consecutive non-empty batches.
- *state*: from the latest ``flow_*`` event (``run_stop`` stops the flows still running).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lakefeed.connectors import registry
from lakefeed.runtime.progress import dropped_late
from lakefeed.spark.connect import describe

BACKPRESSURE_BATCHES = 3
BACKPRESSURE_MARGIN = 1.05
#: Points kept per flow for charts (about 10 minutes at one batch per second).
SERIES_POINTS = 600
#: A running flow with no event for this long is shown as silent (its process may be gone).
SILENT_AFTER_S = 60.0

#: Chart series, in the column order of :meth:`FlowStatus.series_columns`.
SERIES_FIELDS = (
    "input_rps",
    "processed_rps",
    "duration_ms",
    "latency_ms",
    "watermark_delay_s",
    "state_rows",
    "state_memory_bytes",
    "dropped_late",
    "kafka_lag",
)

LagFn = Callable[[dict[str, Any]], dict[str, Any] | None]


def connector_lag(source_progress: dict[str, Any]) -> dict[str, Any] | None:
    """``{"total": n}`` when a connector reads a ``kafka_lag`` figure from this source's
    progress, else None."""
    lag = registry.progress_figures(source_progress).get("kafka_lag")
    return None if lag is None else {"total": lag}


def epoch(value: Any) -> float | None:
    """Seconds since the epoch from a datetime or an ISO-8601 string (Spark's ``...Z`` form)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


_STACK_LINE = re.compile(r"^\s+(at |\.\.\. \d+ more)|^An error occurred while calling o\d+")
#: Spark appends the query's identity and offsets to its errors: not what went wrong
_QUERY_DUMP = "=== Streaming Query ==="
_PROXY = "An exception was raised by the Python Proxy"
_RAISED = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<what>[A-Za-z_]\w*(?:Error|Exception)\b.*)$").match
HEADLINE_CHARS = 400
DETAIL_CHARS = 20_000


def headline(error: str) -> str:
    """The readable part of an error: no Java stack frames or py4j preamble, at most 400 chars.

    Errors from Spark arrive as a Py4J message wrapping a JVM stack trace of a hundred lines;
    a table cell or a banner should show what went wrong, and ``error_detail`` keeps the rest.
    """
    error = error.split(_QUERY_DUMP, 1)[0]
    if error.startswith(_PROXY):
        # A foreachBatch body (the Delta sink, quarantine writes) failed: the cause is the
        # Python traceback's last exception line; its module path is noise.
        raised = [m["what"] for m in map(_RAISED, error.splitlines()) if m is not None]
        error = raised[-1] if raised else error
    kept = [line.strip() for line in error.splitlines() if not _STACK_LINE.match(line)]
    kept = [line for line in kept if line]
    text = " ".join(kept).lstrip(": ") or error.strip()
    return text if len(text) <= HEADLINE_CHARS else text[: HEADLINE_CHARS - 1] + "…"


def _number(value: Any) -> float | None:
    """A finite number or None (JSON for the browser has no NaN)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(frozen=True)
class BatchFigures:
    """What one micro-batch of one flow measured."""

    time: float
    batch_id: int | None
    input_rows: int
    input_rps: float | None
    processed_rps: float | None
    duration_ms: float | None
    latency_ms: float | None
    watermark_delay_s: float | None
    state_rows: int | None
    state_memory_bytes: int | None
    dropped_late: int
    kafka_lag: int | None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _state_sums(operators: list[dict[str, Any]]) -> tuple[int | None, int | None]:
    if not operators:
        return None, None
    rows = sum(int(op.get("numRowsTotal") or 0) for op in operators)
    memory = sum(int(op.get("memoryUsedBytes") or 0) for op in operators)
    return rows, memory


def _kafka_lag(progress: dict[str, Any], lag_fn: LagFn | None) -> int | None:
    extra = (progress.get("lakefeed") or {}).get("kafka_lag")
    if isinstance(extra, dict):
        extra = extra.get("total")
    value = _number(extra)
    if value is not None:
        return int(value)
    if lag_fn is None:
        return None
    lags = [lag_fn(source) for source in progress.get("sources") or []]
    totals = [lag["total"] for lag in lags if lag is not None]
    return sum(totals) if totals else None


def batch_figures(progress: dict[str, Any], lag_fn: LagFn | None = None) -> BatchFigures | None:
    """Figures of one ``StreamingQueryProgress`` dict; None when it carries no batch time."""
    started = epoch(progress.get("timestamp"))
    if started is None:
        return None
    duration = _number((progress.get("durationMs") or {}).get("triggerExecution"))
    event_time = progress.get("eventTime") or {}
    watermark = epoch(event_time.get("watermark"))
    newest = epoch(event_time.get("max"))
    latency = _number((progress.get("lakefeed") or {}).get("e2e_latency_ms"))
    if latency is None and newest is not None:
        latency = max(0.0, (started - newest) * 1000.0 + (duration or 0.0))
    state_rows, state_memory = _state_sums(progress.get("stateOperators") or [])
    batch_id = progress.get("batchId")
    return BatchFigures(
        time=started,
        batch_id=int(batch_id) if isinstance(batch_id, int) else None,
        input_rows=int(progress.get("numInputRows") or 0),
        input_rps=_number(progress.get("inputRowsPerSecond")),
        processed_rps=_number(progress.get("processedRowsPerSecond")),
        duration_ms=duration,
        latency_ms=latency,
        watermark_delay_s=started - watermark if watermark else None,
        state_rows=state_rows,
        state_memory_bytes=state_memory,
        dropped_late=dropped_late(progress),
        kafka_lag=_kafka_lag(progress, lag_fn),
    )


def outpaced(batch: BatchFigures) -> bool:
    """True when this batch's input arrived faster than the flow processed it."""
    if batch.input_rows <= 0 or batch.input_rps is None or batch.processed_rps is None:
        return False
    return batch.input_rps > batch.processed_rps * BACKPRESSURE_MARGIN


@dataclass
class FlowStatus:
    pipeline: str
    name: str
    state: str = "pending"
    error: str | None = None
    error_detail: str | None = None
    last_error: str | None = None
    run_id: str | None = None
    target: str | None = None
    last_event_at: float | None = None
    restarts: int = 0
    batches: int = 0
    input_rows_total: int = 0
    dropped_late_total: int = 0
    #: rows too late for the watermark written to ``<table>_late`` (``late_rows="keep"``)
    kept_late_total: int = 0
    #: the sink the flow writes (``lf.create_sink``), and the rows its batches handed to it
    sink: str | None = None
    sink_rows_total: int = 0
    pressure_streak: int = 0
    last: BatchFigures | None = None
    #: ``description`` of each source in the latest progress (what the flow reads)
    sources: list[str] = field(default_factory=list)
    #: what each external source is ('Kafka topics orders'), as the runtime named it at start
    source_names: list[str] = field(default_factory=list)
    series: deque[BatchFigures] = field(default_factory=lambda: deque(maxlen=SERIES_POINTS))

    @property
    def backpressure(self) -> bool:
        """A live warning: only a running flow can be falling behind."""
        return self.state == "running" and self.pressure_streak >= BACKPRESSURE_BATCHES

    def silent(self, now: float) -> bool:
        """Running, but nothing heard for a while: its process may have died without a stop."""
        if self.state != "running" or self.last_event_at is None:
            return False
        return now - self.last_event_at > SILENT_AFTER_S

    def add_batch(self, batch: BatchFigures) -> None:
        self.last = batch
        self.series.append(batch)
        self.batches += 1
        self.input_rows_total += batch.input_rows
        self.dropped_late_total += batch.dropped_late
        if outpaced(batch):
            self.pressure_streak += 1
        else:
            self.pressure_streak = 0

    def series_columns(self) -> dict[str, list[Any]]:
        """Chart data as columns (``t`` plus :data:`SERIES_FIELDS`), the shape uPlot takes."""
        columns: dict[str, list[Any]] = {"t": [b.time for b in self.series]}
        for name in SERIES_FIELDS:
            columns[name] = [getattr(b, name) for b in self.series]
        return columns

    def as_dict(self, now: float, with_series: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "pipeline": self.pipeline,
            "name": self.name,
            "state": self.state,
            "silent": self.silent(now),
            "error": self.error,
            "error_detail": self.error_detail,
            "last_error": self.last_error,
            "run_id": self.run_id,
            "target": self.target,
            "last_event_at": self.last_event_at,
            "restarts": self.restarts,
            "batches": self.batches,
            "input_rows_total": self.input_rows_total,
            "dropped_late_total": self.dropped_late_total,
            "kept_late_total": self.kept_late_total,
            "sink": self.sink,
            "sink_rows_total": self.sink_rows_total,
            "backpressure": self.backpressure,
            "pressure_streak": self.pressure_streak,
            "last": self.last.as_dict() if self.last else None,
            "sources": self.source_names or self.sources,
        }
        if with_series:
            data["series"] = self.series_columns()
        return data


@dataclass
class RuleCounts:
    action: str
    passed: int = 0
    failed: int = 0


@dataclass
class TableQuality:
    """Expectation results of one table, summed over all batches in the event log."""

    pipeline: str
    table: str
    batches: int = 0
    quarantined: int = 0
    rules: dict[str, RuleCounts] = field(default_factory=dict)

    def add(self, details: dict[str, Any]) -> None:
        self.batches += 1
        self.quarantined += int(details.get("quarantined") or 0)
        for name, counts in (details.get("rules") or {}).items():
            rule = self.rules.setdefault(name, RuleCounts(str(counts.get("action") or "warn")))
            rule.action = str(counts.get("action") or rule.action)
            rule.passed += int(counts.get("passed") or 0)
            rule.failed += int(counts.get("failed") or 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "table": self.table,
            "batches": self.batches,
            "quarantined": self.quarantined,
            "rules": {
                name: {"action": r.action, "passed": r.passed, "failed": r.failed}
                for name, r in sorted(self.rules.items())
            },
        }


@dataclass
class PipelineStatus:
    name: str
    run_id: str | None = None
    mode: str | None = None
    spark: dict[str, str] = field(default_factory=dict)  # lakefeed.spark.connect.session_facts
    state: str = "unknown"
    started_at: float | None = None
    stopped_at: float | None = None
    stop_reason: str | None = None
    last_error: str | None = None
    graph: dict[str, Any] = field(default_factory=lambda: {"nodes": [], "edges": []})
    flows: dict[str, FlowStatus] = field(default_factory=dict)
    tables: dict[str, TableQuality] = field(default_factory=dict)

    def flow(self, name: str) -> FlowStatus:
        if name not in self.flows:
            self.flows[name] = FlowStatus(self.name, name)
        return self.flows[name]


_FLOW_STATES = {
    "flow_start": "running",
    "flow_progress": "running",
    "flow_stop": "stopped",
    "flow_failed": "failed",
    "flow_restart": "restarting",
}


class Monitor:
    """Everything the event log says about the pipelines of one lakehouse, folded event by event.

    ``event_log_problems`` says what of the log could not be read and ``event_log_fix`` how to
    mend it (set by whoever reads the log), so every view of a damaged log shows what it can and
    says what is missing.
    """

    def __init__(self, lag_fn: LagFn | None = None) -> None:
        self.pipelines: dict[str, PipelineStatus] = {}
        self.events_seen = 0
        self.event_log_problems: list[str] = []
        self.event_log_fix: str | None = None
        self._lag_fn = lag_fn if lag_fn is not None else connector_lag

    def apply_all(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, event: dict[str, Any]) -> None:
        """Fold one event (a row of the event log, ``details`` already parsed)."""
        self.events_seen += 1
        pipeline = self.pipelines.setdefault(event["pipeline"], PipelineStatus(event["pipeline"]))
        kind = event["event_type"]
        at = epoch(event.get("timestamp"))
        details = event.get("details") or {}
        if kind == "run_start":
            self._run_start(pipeline, event, details, at)
        elif kind == "run_stop":
            self._run_stop(pipeline, details, at)
        elif kind == "expectations":
            table = str(details.get("table") or event.get("flow") or "?")
            if table not in pipeline.tables:
                pipeline.tables[table] = TableQuality(pipeline.name, table)
            pipeline.tables[table].add(details)
        elif kind == "late_rows" and event.get("flow"):
            pipeline.flow(event["flow"]).kept_late_total += int(details.get("kept") or 0)
        elif kind == "sink_batch" and event.get("flow"):
            pipeline.flow(event["flow"]).sink_rows_total += int(details.get("rows") or 0)
        elif kind == "error":
            pipeline.last_error = headline(str(details.get("error") or event.get("message")))
        if event.get("flow") and kind in _FLOW_STATES:
            self._flow_event(pipeline.flow(event["flow"]), kind, event, details, at)
        elif event.get("flow") and kind == "error":
            pipeline.flow(event["flow"]).last_error = pipeline.last_error

    def _run_start(
        self, pipeline: PipelineStatus, event: dict[str, Any], details: dict[str, Any], at: Any
    ) -> None:
        pipeline.run_id = event.get("run_id")
        pipeline.mode = details.get("mode")
        pipeline.spark = details.get("spark") or {}
        pipeline.state = "running"
        pipeline.started_at = at
        pipeline.stopped_at = None
        pipeline.stop_reason = None
        pipeline.last_error = None
        graph = details.get("graph") or {}
        pipeline.graph = {"nodes": graph.get("nodes") or [], "edges": graph.get("edges") or []}
        for flow in pipeline.flows.values():
            flow.state, flow.error, flow.pressure_streak = "pending", None, 0

    def _run_stop(self, pipeline: PipelineStatus, details: dict[str, Any], at: Any) -> None:
        pipeline.state = "stopped"
        pipeline.stopped_at = at
        reason = details.get("reason")
        pipeline.stop_reason = headline(str(reason)) if reason else None
        for flow in pipeline.flows.values():
            if flow.state in ("running", "pending", "restarting"):
                flow.state = "stopped"

    def _flow_event(
        self,
        flow: FlowStatus,
        kind: str,
        event: dict[str, Any],
        details: dict[str, Any],
        at: float | None,
    ) -> None:
        flow.state = _FLOW_STATES[kind]
        flow.run_id = event.get("run_id")
        flow.last_event_at = at
        if kind == "flow_failed":
            full = str(details.get("error") or event.get("message"))
            flow.error = flow.last_error = headline(full)
            flow.error_detail = "\n".join(filter(None, [full, details.get("traceback")]))[
                :DETAIL_CHARS
            ]
        elif kind in ("flow_start", "flow_restart"):
            flow.error = None
            flow.target = details.get("target") or flow.target
            flow.sink = details.get("sink") or flow.sink
            flow.restarts += kind == "flow_restart"
            flow.source_names = [str(s) for s in details.get("sources") or flow.source_names]
        elif kind == "flow_progress":
            flow.error = None
            batch = batch_figures(details, self._lag_fn)
            if batch is not None:
                flow.add_batch(batch)
            flow.sources = [str(s.get("description")) for s in details.get("sources") or []]

    def flows(self) -> list[FlowStatus]:
        return [f for p in self.pipelines.values() for f in p.flows.values()]

    def snapshot(self, now: float, series: str | None = "*") -> dict[str, Any]:
        """The JSON the web UI polls: pipelines with graph, flows, tables.

        ``series`` says which flows carry their chart series: ``"*"`` all, a flow name that one
        (the UI charts one flow at a time, so it need not download every flow's history).
        """
        return {
            "now": now,
            "events_seen": self.events_seen,
            "event_log_problems": self.event_log_problems,
            "event_log_fix": self.event_log_fix,
            "pipelines": [
                {
                    "name": p.name,
                    "run_id": p.run_id,
                    "mode": p.mode,
                    "spark": describe(p.spark) if p.spark else None,
                    "state": p.state,
                    "started_at": p.started_at,
                    "stopped_at": p.stopped_at,
                    "stop_reason": p.stop_reason,
                    "last_error": p.last_error,
                    "graph": p.graph,
                    "flows": [f.as_dict(now, series in ("*", f.name)) for f in p.flows.values()],
                    "tables": [t.as_dict() for t in p.tables.values()],
                }
                for p in self.pipelines.values()
            ],
        }
