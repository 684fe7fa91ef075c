"""The per-flow figures fold (Spark-free): the numbers the UI, /metrics and the CLI share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lakefeed.observe.figures import (
    BACKPRESSURE_BATCHES,
    SILENT_AFTER_S,
    Monitor,
    batch_figures,
    headline,
)
from tests.observe.progress import GRAPH, progress

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def event(kind: str, at: datetime, flow: str | None = None, run: str = "r1", **details: Any):
    return {
        "pipeline": "iot",
        "run_id": run,
        "flow": flow,
        "event_type": kind,
        "level": "ERROR" if kind == "flow_failed" else "INFO",
        "message": kind,
        "timestamp": at,
        "details": details,
    }


def fold(*events: dict[str, Any]) -> Monitor:
    monitor = Monitor()
    monitor.apply_all(events)
    return monitor


def test_batch_figures_from_spark_progress():
    p = progress(
        7,
        T0,
        rows=500,
        input_rps=250.0,
        processed_rps=1000.0,
        duration_ms=400,
        newest_event=T0 - timedelta(seconds=3),
        watermark=T0 - timedelta(seconds=33),
        state_rows=42,
        dropped=5,
    )
    b = batch_figures(p)
    assert b is not None
    assert (b.batch_id, b.input_rows, b.input_rps, b.processed_rps) == (7, 500, 250.0, 1000.0)
    assert b.time == T0.timestamp()
    assert b.duration_ms == 400
    # newest event 3 s before the trigger, committed 0.4 s after it
    assert b.latency_ms == pytest.approx(3400)
    assert b.watermark_delay_s == pytest.approx(33)
    assert (b.state_rows, b.state_memory_bytes, b.dropped_late) == (42, 4200, 5)
    assert b.kafka_lag is None


def test_initial_watermark_and_missing_figures_are_none():
    b = batch_figures(progress(0, T0, newest_event=T0))  # watermark still at the epoch
    assert b is not None and b.watermark_delay_s is None
    bare = batch_figures({"timestamp": "2026-03-01T12:00:00.000Z", "inputRowsPerSecond": "NaN"})
    assert bare is not None
    assert (bare.input_rps, bare.latency_ms, bare.state_rows, bare.batch_id) == (
        None,
        None,
        None,
        None,
    )
    assert batch_figures({"batchId": 3}) is None  # no timestamp: not a batch


def test_runtime_latency_wins_over_event_time_estimate():
    p = progress(1, T0, newest_event=T0 - timedelta(seconds=10))
    p["lakefeed"] = {"e2e_latency_ms": 850, "kafka_lag": {"total": 12, "partitions": {}}}
    b = batch_figures(p)
    assert b is not None and (b.latency_ms, b.kafka_lag) == (850, 12)


def test_kafka_lag_from_source_offsets():
    source = {
        "description": "lakefeed_kafka[orders]",
        "startOffset": {"orders": {"0": 80, "1": 40}},
        "endOffset": {"orders": {"0": 90, "1": 50}},
        "latestOffset": {"orders": {"0": 100, "1": 50}},
    }
    m = fold(event("flow_progress", T0, "orders", **progress(1, T0, sources=[source])))
    last = m.pipelines["iot"].flows["orders"].last
    assert last is not None and last.kafka_lag == 10


def test_flow_states_follow_the_latest_event():
    m = fold(
        event("run_start", T0, mode="continuous", graph=GRAPH),
        event("flow_start", T0, "bronze", checkpoint="c", target="bronze"),
        event("flow_progress", T0, "bronze", **progress(0, T0)),
    )
    p = m.pipelines["iot"]
    assert (p.state, p.mode, p.graph["edges"]) == ("running", "continuous", GRAPH["edges"])
    bronze = p.flows["bronze"]
    assert (bronze.state, bronze.target, bronze.batches) == ("running", "bronze", 1)
    m.apply(event("flow_failed", T0, "bronze", error="ValueError: bad temperature"))
    assert (bronze.state, bronze.error) == ("failed", "ValueError: bad temperature")
    m.apply(event("flow_restart", T0, "bronze", attempt=1))
    assert (bronze.state, bronze.error, bronze.restarts) == ("restarting", None, 1)
    assert bronze.last_error == "ValueError: bad temperature"
    m.apply(event("flow_progress", T0, "bronze", **progress(1, T0)))
    m.apply(event("run_stop", T0, reason="finished"))
    assert (bronze.state, p.state, p.stop_reason) == ("stopped", "stopped", "finished")
    m.apply(event("run_start", T0, run="r2", mode="once", graph=GRAPH))
    assert (bronze.state, p.run_id, bronze.batches) == ("pending", "r2", 2)


def test_backpressure_needs_consecutive_outpaced_batches():
    m = fold(event("flow_start", T0, "bronze"))
    flow = m.pipelines["iot"].flows["bronze"]
    slow = {"input_rps": 500.0, "processed_rps": 200.0}
    for i in range(BACKPRESSURE_BATCHES - 1):
        m.apply(event("flow_progress", T0, "bronze", **progress(i, T0, **slow)))
    assert not flow.backpressure
    m.apply(event("flow_progress", T0, "bronze", **progress(9, T0, rows=0, **slow)))  # caught up
    assert flow.pressure_streak == 0
    for i in range(BACKPRESSURE_BATCHES):
        m.apply(event("flow_progress", T0, "bronze", **progress(10 + i, T0, **slow)))
    assert flow.backpressure
    m.apply(event("flow_progress", T0, "bronze", **progress(20, T0)))  # keeps up again
    assert not flow.backpressure
    assert flow.series_columns()["input_rps"][-1] == 50.0
    assert len(flow.series_columns()["t"]) == 2 * BACKPRESSURE_BATCHES + 1


def test_expectations_sum_per_table_and_rule():
    rules = {"valid_temp": {"action": "drop", "passed": 90, "failed": 10}}
    m = fold(
        event("expectations", T0, "bronze", batch_id=0, table="bronze", rules=rules, quarantined=4),
        event("expectations", T0, "bronze", batch_id=1, table="bronze", rules=rules, quarantined=6),
    )
    quality = m.pipelines["iot"].tables["bronze"].as_dict()
    assert quality["rules"] == {"valid_temp": {"action": "drop", "passed": 180, "failed": 20}}
    assert (quality["quarantined"], quality["batches"]) == (10, 2)


def test_silent_running_flow_and_snapshot_shape():
    m = fold(event("flow_progress", T0, "bronze", **progress(0, T0)))
    flow = m.pipelines["iot"].flows["bronze"]
    assert not flow.silent(T0.timestamp() + 1)
    assert flow.silent(T0.timestamp() + SILENT_AFTER_S + 1)
    snap = m.snapshot(T0.timestamp())
    (flow_json,) = snap["pipelines"][0]["flows"]
    assert flow_json["last"]["input_rps"] == 50.0
    assert set(flow_json["series"]) >= {"t", "input_rps", "processed_rps", "kafka_lag"}


def test_errors_are_shown_without_the_jvm_stack():
    java = (
        "An error occurred while calling o377.start.\n"
        ": org.apache.spark.SparkClassNotFoundException: [DATA_SOURCE_NOT_FOUND] no delta\n"
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.x(QueryExecutionErrors.scala:770)\n"
        "Caused by: java.lang.ClassNotFoundException: delta.DefaultSource\n"
        "\tat java.base/java.net.URLClassLoader.findClass(URLClassLoader.java:445)\n"
        "\t... 14 more\n"
        "=== Streaming Query ===\nIdentifier: gold [id = 1]\nCurrent Committed Offsets: {}\n"
    )
    assert headline(java) == (
        "org.apache.spark.SparkClassNotFoundException: [DATA_SOURCE_NOT_FOUND] no delta "
        "Caused by: java.lang.ClassNotFoundException: delta.DefaultSource"
    )
    assert len(headline("x" * 5000)) == 400
    m = fold(event("flow_failed", T0, "gold", error=java, traceback="Traceback ..."))
    gold = m.pipelines["iot"].flows["gold"]
    assert gold.error == headline(java)
    assert gold.error_detail is not None and "URLClassLoader" in gold.error_detail


PROXY_ERROR = "\n".join(
    [
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent "
        "call last):",
        '  File "/x/py4j/clientserver.py", line 644, in _call_proxy',
        "    return_value = getattr(self.pool[obj_id], method)(*params)",
        '  File "/x/pyspark/errors/exceptions/captured.py", line 262, in deco',
        "    raise converted from None",
        "pyspark.errors.exceptions.captured.SparkRuntimeException: [USER_RAISED_EXCEPTION] "
        "expectation battery_above_100 failed: 1 row SQLSTATE: P0001",
        "",
        "=== Streaming Query ===",
        "Identifier: [id = 89c89adf, runId = 58ec4eb8]",
        "Logical Plan:",
        "~Project [CASE WHEN ... raise_error(USER_RAISED_EXCEPTION, ...) AS v#2L]",
    ]
)


def test_headline_of_a_foreach_batch_failure_is_its_cause() -> None:
    assert headline(PROXY_ERROR) == (
        "SparkRuntimeException: [USER_RAISED_EXCEPTION] expectation battery_above_100 failed: "
        "1 row SQLSTATE: P0001"
    )


def test_headline_of_a_bare_proxy_error_keeps_it() -> None:
    assert headline(PROXY_ERROR.split("Traceback")[0]).startswith("An exception was raised")


def test_sink_flows_add_up_the_rows_they_handed_their_sink():
    from rich.console import Console

    from lakefeed.observe.console import status_view

    monitor = fold(
        event("run_start", T0, mode="available-now"),
        event("flow_start", T0, "to_topic", target="Kafka topic alerts", sink="alerts"),
        event("sink_batch", T0, "to_topic", batch_id=0, sink="alerts", rows=30),
        event("sink_batch", T0, "to_topic", batch_id=1, sink="alerts", rows=12),
    )
    flow = monitor.pipelines["iot"].flows["to_topic"]
    assert (flow.sink, flow.sink_rows_total) == ("alerts", 42)
    assert flow.as_dict(0.0)["sink"] == "alerts"
    console = Console(width=200, record=True)
    console.print(status_view(monitor, 0.0))
    text = console.export_text()
    assert "sinks" in text and "Kafka topic alerts" in text and "42" in text


def test_late_rows_add_up_per_flow_across_batches_and_runs():
    """Dropped: each batch's ``numRowsDroppedByWatermark`` (every stateful operator); kept:
    ``late_rows`` events. A new run keeps the totals; the latest batch keeps its own count."""
    monitor = fold(
        event("run_start", T0, mode="available-now"),
        event("flow_progress", T0, "gold", **progress(0, T0, state_rows=9, dropped=4)),
        event("flow_progress", T0, "gold", **progress(1, T0, state_rows=9, dropped=0)),
        event("late_rows", T0, "gold", batch_id=1, kept=3, table="gold_late"),
        event("run_start", T0, run="r2", mode="available-now"),
        event("flow_progress", T0, "gold", run="r2", **progress(2, T0, state_rows=9, dropped=2)),
    )
    flow = monitor.pipelines["iot"].flows["gold"]
    assert (flow.dropped_late_total, flow.kept_late_total) == (6, 3)
    assert flow.last is not None and flow.last.dropped_late == 2
    shown = flow.as_dict(0.0, with_series=True)
    assert (shown["dropped_late_total"], shown["kept_late_total"]) == (6, 3)
    assert shown["series"]["dropped_late"] == [4, 0, 2]
