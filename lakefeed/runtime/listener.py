"""Query progress → event log: every micro-batch's progress and its expectation counts."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import QueryProgressEvent, StreamingQueryProgress

from lakefeed.core.logs import get_logger
from lakefeed.pipeline.expectations import OBSERVATION_NAME, Expectation, dropped_rows, rule_counts
from lakefeed.runtime.event_log import EventLog
from lakefeed.runtime.sinks import OBSERVATION as SINK_OBSERVATION
from lakefeed.runtime.skipped import report_skipped_files
from lakefeed.runtime.state_memory import StateSizing
from lakefeed.spark import connect

log = get_logger(__name__)


def expectation_event(
    table: str, rules: list[Expectation], batch_id: int | None, metrics: Mapping
) -> dict:
    """The ``expectations`` event details for one batch (or one materialized view refresh)."""
    return {
        "batch_id": batch_id,
        "table": table,
        "rules": rule_counts(rules, metrics),
        "quarantined": dropped_rows(rules, metrics),
    }


class ProgressListener(StreamingQueryListener):
    """Runs on the driver; only this run's queries (by name) are recorded.

    Spark delivers progress on its listener bus, after the batch: a query that ends (an
    available-now run, a stop) can be gone before its last progress arrives. ``catch_up`` records
    what the bus has not delivered yet from the query's own recent progress; each batch is
    recorded once, whichever path sees it first.

    It also keeps each query run's newest ended batch (its progress event comes after the batch
    and its commit log are written), of every query, so a graceful stop can wait for the end of
    the batch in flight (:meth:`wait_batch_end`) instead of an idle moment, which a query whose
    batches outlast their trigger interval never has.
    """

    def __init__(
        self,
        events: EventLog,
        rules: Mapping[str, list[Expectation]],
        sizing: StateSizing | None = None,
    ) -> None:
        self.events = events
        self.rules = dict(rules)
        self.sizing = sizing  # the RocksDB bound each batch's state is held against
        self._warned: set[tuple[str, str]] = set()  # (flow, kind): each sizing warning once
        self.flows: set[str] = set()
        # External sources per flow (from the evaluator), for skipped-file events.
        self.sources: dict[str, list[tuple[str, dict[str, str]]]] = {}
        self.sinks: dict[str, str] = {}  # flow -> the sink it writes
        # query run id -> its newest recorded batch: both paths see a run's batches in order,
        # so one int per run (not one entry per batch, for weeks) tells what is recorded.
        self._recorded: dict[str, int] = {}
        self._lock = threading.Lock()
        self._ended_batch: dict[str, int] = {}  # query run id -> its newest ended batch
        self._ended = threading.Condition()

    def onQueryStarted(self, event) -> None:  # noqa: ANN001
        pass

    def onQueryIdle(self, event) -> None:  # noqa: ANN001
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: ANN001
        pass

    def onQueryProgress(self, event) -> None:  # noqa: ANN001
        try:
            self._batch_ended(str(event.progress.runId), int(event.progress.batchId))
            self._record(event.progress)
        except Exception:  # a listener must never take the pipeline down
            log.exception("could not record query progress")

    def wait_batch_end(self, run_id: str, after: int, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the end of a batch of ``run_id`` later than ``after``."""
        with self._ended:
            return self._ended.wait_for(lambda: self._ended_batch.get(run_id, -1) > after, timeout)

    def _batch_ended(self, run_id: str, batch_id: int) -> None:
        with self._ended:
            self._ended_batch[run_id] = max(batch_id, self._ended_batch.get(run_id, -1))
            self._ended.notify_all()

    def catch_up(self, query) -> None:  # noqa: ANN001
        """Record the progress of ``query``'s batches that the listener bus has not delivered."""
        for progress in query.recentProgress:
            self._record(progress)

    def _record(self, progress) -> None:  # noqa: ANN001
        flow = progress.name
        if flow not in self.flows:
            return
        with self._lock:
            run_id, batch_id = str(progress.runId), int(progress.batchId)
            if batch_id <= self._recorded.get(run_id, -1):
                return
            self._recorded[run_id] = batch_id
        details = json.loads(progress.json)
        self.events.emit(
            "flow_progress",
            f"batch {progress.batchId}: {progress.numInputRows} rows",
            flow=flow,
            details=details,
        )
        report_skipped_files(self.events, flow, self.sources.get(flow, []), progress.batchId)
        self._sink_rows(flow, progress)
        self._state_sizing(flow, details)
        observed = (progress.observedMetrics or {}).get(OBSERVATION_NAME)
        rules = self.rules.get(flow) or []
        if observed is not None and rules:
            metrics = observed.asDict()
            self.events.emit(
                "expectations",
                f"batch {progress.batchId}: expectations checked",
                flow=flow,
                details=expectation_event(flow, rules, progress.batchId, metrics),
            )

    def _state_sizing(self, flow: str, details: dict) -> None:
        """``state_memory`` (WARN), once per flow and kind: its state outgrew the RocksDB bound
        (:class:`lakefeed.runtime.state_memory.StateSizing`)."""
        if self.sizing is None:
            return
        for warning in self.sizing.warnings(details):
            if (flow, warning.kind) in self._warned:
                continue
            self._warned.add((flow, warning.kind))
            log.warning("%s: %s", flow, warning.message)
            self.events.emit(
                "state_memory",
                f"{flow}: {warning.message}",
                flow=flow,
                level="WARN",
                details={"kind": warning.kind, **warning.details},
            )

    def _sink_rows(self, flow: str, progress) -> None:  # noqa: ANN001
        """``sink_batch``: the rows a batch of a sink flow handed its sink."""
        sink = self.sinks.get(flow)
        observed = (progress.observedMetrics or {}).get(SINK_OBSERVATION)
        if sink is None or observed is None:
            return
        rows = int(observed.asDict().get("rows") or 0)
        self.events.emit(
            "sink_batch",
            f"batch {progress.batchId}: {rows} rows to sink {sink}",
            flow=flow,
            details={"batch_id": int(progress.batchId), "sink": sink, "rows": rows},
        )


def attach(spark: SparkSession, listener: StreamingQueryListener) -> Callable[[], None]:
    """Have ``listener`` hear the progress of ``spark``'s queries; returns what detaches it.

    pyspark's ``addListener`` builds each event's Python object field by field over Py4J
    (``StreamingQueryProgress.fromJObject``: every duration, state operator and custom metric
    a round trip), about 640 calls into the JVM per micro-batch of a stateful query, made on
    the listener bus while the next batch runs and taking CPU from its tasks. On a classic
    session the listener gets progress the way Spark Connect and ``recentProgress`` give it:
    built from the progress JSON, two calls per batch (:class:`_FromJson`). A listener here
    hears progress only: lakefeed's start, idle and end events come from the runner.
    """
    if connect.is_connect(spark):
        spark.streams.addListener(listener)
        return lambda: spark.streams.removeListener(listener)

    gateway = spark.sparkContext._gateway
    assert gateway is not None  # a classic session's
    ensure_callback_server_started(gateway)
    manager = spark._jsparkSession.streams()
    wrapper = gateway.jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(
        _FromJson(listener)
    )
    manager.addListener(wrapper)
    return lambda: manager.removeListener(wrapper)


class _FromJson:
    """Implements Spark's ``PythonStreamingQueryListener`` (the interface pyspark's own listener
    wrapper calls) by handing ``listener`` each progress built from its JSON."""

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

    def __init__(self, listener: StreamingQueryListener) -> None:
        self.listener = listener

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            progress = StreamingQueryProgress.fromJson(json.loads(event.progress().json()))
        except Exception:  # a listener must never take the pipeline down
            log.exception("could not read query progress")
            return
        self.listener.onQueryProgress(QueryProgressEvent(progress))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
