"""Prometheus exposition of the same per-flow figures the UI and ``lakefeed status`` show.

A custom collector reads a :class:`~lakefeed.observe.figures.Monitor` at scrape time, so the
numbers come from the event log (any process, running or stopped) rather than from in-process
counters. Gauges carry the latest batch's value; ``_total`` counters are summed over the whole
event log, so they only grow while the log is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from lakefeed.observe.figures import FlowStatus, Monitor

FLOW_LABELS = ["pipeline", "flow"]
STATES = ("pending", "running", "restarting", "stopped", "failed")

#: (metric name, help, :class:`BatchFigures` field, factor to the metric's base unit)
_LAST_BATCH_GAUGES: tuple[tuple[str, str, str, float], ...] = (
    ("input_rows_per_second", "Input rate of the latest batch", "input_rps", 1.0),
    ("processed_rows_per_second", "Processing rate of the latest batch", "processed_rps", 1.0),
    ("batch_duration_seconds", "Duration of the latest batch", "duration_ms", 0.001),
    ("latency_seconds", "End-to-end latency of the latest batch", "latency_ms", 0.001),
    ("watermark_delay_seconds", "Batch time minus watermark", "watermark_delay_s", 1.0),
    ("state_rows", "Rows held in state stores", "state_rows", 1.0),
    ("state_memory_bytes", "Memory used by state stores", "state_memory_bytes", 1.0),
    ("kafka_lag_messages", "Messages the Kafka sources are behind", "kafka_lag", 1.0),
    ("last_batch_id", "Id of the latest batch", "batch_id", 1.0),
)

_FLOW_COUNTERS: tuple[tuple[str, str, Callable[[FlowStatus], float]], ...] = (
    ("batches", "Batches recorded in the event log", lambda f: f.batches),
    ("input_rows", "Input rows over all recorded batches", lambda f: f.input_rows_total),
    (
        "rows_dropped_by_watermark",
        "Rows dropped as too late by stateful operators",
        lambda f: f.dropped_late_total,
    ),
    (
        "rows_kept_late",
        "Rows too late for the watermark kept in <table>_late (late_rows='keep')",
        lambda f: f.kept_late_total,
    ),
    ("restarts", "Automatic restarts", lambda f: f.restarts),
)


class MonitorCollector(Collector):
    """Yields lakefeed_* families from the monitor returned by ``source`` at each scrape."""

    def __init__(self, source: Callable[[], Monitor]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        monitor = self._source()
        flows = monitor.flows()
        yield from self._flow_gauges(flows)
        yield from self._flow_counters(flows)
        yield from self._flow_states(flows, time.time())
        yield from self._expectations(monitor)
        yield GaugeMetricFamily(
            "lakefeed_event_log_problems",
            "Parts of the event log that cannot be read (0: healthy; see lakefeed status)",
            value=len(monitor.event_log_problems),
        )

    @staticmethod
    def _flow_gauges(flows: list[FlowStatus]) -> Iterator[Metric]:
        for name, doc, attr, scale in _LAST_BATCH_GAUGES:
            family = GaugeMetricFamily(f"lakefeed_flow_{name}", doc, labels=FLOW_LABELS)
            for flow in flows:
                value = getattr(flow.last, attr) if flow.last else None
                if value is not None:
                    family.add_metric([flow.pipeline, flow.name], value * scale)
            yield family
        family = GaugeMetricFamily(
            "lakefeed_flow_backpressure",
            "1 when input outpaced processing for several consecutive batches",
            labels=FLOW_LABELS,
        )
        for flow in flows:
            family.add_metric([flow.pipeline, flow.name], float(flow.backpressure))
        yield family

    @staticmethod
    def _flow_counters(flows: list[FlowStatus]) -> Iterator[Metric]:
        for name, doc, read in _FLOW_COUNTERS:
            family = CounterMetricFamily(f"lakefeed_flow_{name}", doc, labels=FLOW_LABELS)
            for flow in flows:
                family.add_metric([flow.pipeline, flow.name], read(flow))
            yield family

    @staticmethod
    def _flow_states(flows: list[FlowStatus], now: float) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "lakefeed_flow_state",
            "1 for the flow's current state (from its latest event)",
            labels=[*FLOW_LABELS, "state"],
        )
        for flow in flows:
            for state in STATES:
                family.add_metric([flow.pipeline, flow.name, state], float(flow.state == state))
        yield family
        family = GaugeMetricFamily(
            "lakefeed_flow_last_event_age_seconds",
            "Seconds since the flow's latest event",
            labels=FLOW_LABELS,
        )
        for flow in flows:
            if flow.last_event_at is not None:
                family.add_metric([flow.pipeline, flow.name], now - flow.last_event_at)
        yield family

    @staticmethod
    def _expectations(monitor: Monitor) -> Iterator[Metric]:
        rules = CounterMetricFamily(
            "lakefeed_expectation_rows",
            "Rows checked by an expectation, by outcome",
            labels=["pipeline", "table", "rule", "action", "outcome"],
        )
        quarantined = CounterMetricFamily(
            "lakefeed_quarantined_rows",
            "Rows written to the quarantine table",
            labels=["pipeline", "table"],
        )
        for pipeline in monitor.pipelines.values():
            for table in pipeline.tables.values():
                quarantined.add_metric([pipeline.name, table.table], table.quarantined)
                for rule_name, rule in table.rules.items():
                    labels = [pipeline.name, table.table, rule_name, rule.action]
                    rules.add_metric([*labels, "passed"], rule.passed)
                    rules.add_metric([*labels, "failed"], rule.failed)
        yield rules
        yield quarantined


def render_metrics(source: Callable[[], Monitor]) -> bytes:
    """The Prometheus text exposition for the monitor ``source`` returns."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MonitorCollector(source))
    return generate_latest(registry)
