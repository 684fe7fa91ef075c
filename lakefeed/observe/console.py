"""Terminal views for ``lakefeed status`` and ``lakefeed events`` (rich tables).

They render the same :class:`~lakefeed.observe.figures.Monitor` figures as the web UI and
``/metrics``, formatted for a terminal.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from lakefeed.observe.figures import FlowStatus, Monitor, TableQuality, batch_figures, headline
from lakefeed.observe.tables import TableReader
from lakefeed.observe.tail import event_record
from lakefeed.spark.connect import describe

STATE_STYLES = {
    "running": "green",
    "failed": "bold red",
    "stopped": "dim",
    "pending": "yellow",
    "restarting": "yellow",
    "silent": "yellow",
}
LEVEL_STYLES = {"ERROR": "bold red", "WARNING": "yellow", "WARN": "yellow", "DEBUG": "dim"}
_OUTCOME = {"drop": "dropped", "fail": "failed", "warn": "warned"}


def make_console() -> Console:
    """A console for these tables: piped output gets a wide page instead of 80 columns."""
    console = Console()
    return console if console.is_terminal else Console(width=max(console.width, 180))


def number(value: float | None) -> str:
    if value is None:
        return "–"
    size = abs(value)
    for limit, unit, suffix, digits in ((1e9, 1e9, "G", 2), (1e6, 1e6, "M", 2), (1e4, 1e3, "k", 1)):
        if size >= limit:
            return f"{value / unit:.{digits}f}{suffix}"
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.{0 if size >= 100 else 1 if size >= 10 else 2}f}"


def millis(value: float | None) -> str:
    if value is None:
        return "–"
    if abs(value) < 1000:
        return f"{value:.0f} ms"
    if abs(value) < 120_000:
        return f"{value / 1000:.{2 if abs(value) < 10_000 else 1}f} s"
    return f"{value / 60_000:.1f} min"


def seconds(value: float | None) -> str:
    return millis(None if value is None else value * 1000)


def size(value: float | None) -> str:
    if value is None:
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _clock(at: float | None) -> str:
    return datetime.fromtimestamp(at).strftime("%H:%M:%S") if at else "–"


def flow_state(flow: FlowStatus, now: float) -> str:
    return "silent" if flow.silent(now) else flow.state


def flows_table(monitor: Monitor, now: float) -> Table:
    """One row per flow: state and the latest batch's figures, as in the UI's flow table."""
    table = Table(title="flows", title_justify="left", expand=False)
    for header in ("pipeline", "flow", "state", "batch"):
        table.add_column(header, no_wrap=True)
    for header in (
        "input/s",
        "processed/s",
        "batch",
        "latency",
        "wm delay",
        "state rows",
        "state mem",
        "late drops",
        "kafka lag",
    ):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("")
    for flow in monitor.flows():
        last = flow.last
        state = flow_state(flow, now)
        table.add_row(
            flow.pipeline,
            flow.name,
            Text(state, style=STATE_STYLES.get(state, "")),
            str(last.batch_id) if last and last.batch_id is not None else "–",
            number(last.input_rps if last else None),
            number(last.processed_rps if last else None),
            millis(last.duration_ms if last else None),
            millis(last.latency_ms if last else None),
            seconds(last.watermark_delay_s if last else None),
            number(last.state_rows if last else None),
            size(last.state_memory_bytes if last else None),
            late_cell(flow),
            number(last.kafka_lag if last else None),
            Text("backpressure", style="bold yellow") if flow.backpressure else "",
        )
    return table


def sinks_table(monitor: Monitor) -> Table | None:
    """One row per flow writing a sink: where it writes and the rows it handed over."""
    flows = [f for f in monitor.flows() if f.sink]
    if not flows:
        return None
    table = Table(title="sinks", title_justify="left", expand=False)
    for header in ("pipeline", "sink", "flow", "writes to"):
        table.add_column(header, no_wrap=True)
    table.add_column("rows", justify="right", no_wrap=True)
    for flow in flows:
        table.add_row(
            flow.pipeline, flow.sink, flow.name, flow.target or "?", number(flow.sink_rows_total)
        )
    return table


def late_cell(flow: FlowStatus) -> str:
    """Rows dropped as late, and those kept in ``<table>_late`` when the flow keeps them."""
    dropped = number(flow.dropped_late_total)
    return f"{dropped} (+{number(flow.kept_late_total)} kept)" if flow.kept_late_total else dropped


def quality_table(monitor: Monitor, tables: TableReader | None = None) -> Table | None:
    """Expectation counts per rule; the quarantine table's size when ``tables`` can read it."""
    rows = [
        (pipeline.name, quality.table, name, rule, _quarantine(quality, tables))
        for pipeline in monitor.pipelines.values()
        for quality in pipeline.tables.values()
        for name, rule in sorted(quality.rules.items())
    ]
    if not rows:
        return None
    table = Table(title="expectations", title_justify="left")
    for header in ("pipeline", "table", "rule", "action"):
        table.add_column(header)
    for header in ("passed", "failed", "quarantine"):
        table.add_column(header, justify="right")
    for pipeline, name, rule_name, rule, quarantined in rows:
        failed = f"{number(rule.failed)} {_OUTCOME.get(rule.action, '')}".strip()
        table.add_row(
            pipeline, name, rule_name, rule.action, number(rule.passed), failed, quarantined
        )
    return table


def _quarantine(quality: TableQuality, tables: TableReader | None) -> str:
    found = tables.quarantine(quality.table) if tables is not None else None
    if found is None:
        return number(quality.quarantined)
    name, rows = found
    return f"{number(rows)} rows in {name}"


def status_view(monitor: Monitor, now: float, tables: TableReader | None = None) -> Group:
    """Pipelines line, flows table, failed flows' errors, expectations table."""
    parts: list[Any] = [
        Text(f"event log: {problem}", style="bold red") for problem in monitor.event_log_problems
    ]
    if monitor.event_log_fix:
        parts.append(Text(f"  fix: {monitor.event_log_fix}", style="red"))
    if not monitor.pipelines:
        if not parts:
            parts.append(Text("no events in this lakehouse yet: start a pipeline", style="yellow"))
        return Group(*parts)
    for p in monitor.pipelines.values():
        line = Text.assemble(
            ("pipeline ", "bold"),
            (p.name, "bold cyan"),
            " ",
            (p.state, STATE_STYLES.get(p.state, "")),
            f"  run {(p.run_id or '?')[:8]}  mode {p.mode or '?'}  started {_clock(p.started_at)}",
        )
        if p.stop_reason:
            line.append(f"  stopped {_clock(p.stopped_at)} ({p.stop_reason})")
        parts.append(line)
        if p.spark:
            parts.append(Text(f"  spark: {describe(p.spark)}", style="dim"))
        if p.last_error:
            parts.append(Text(f"  error: {p.last_error}", style="red"))
    parts.append(flows_table(monitor, now))
    sinks = sinks_table(monitor)
    if sinks is not None:
        parts.append(sinks)
    for flow in monitor.flows():
        if flow.source_names:  # what it reads, e.g. which reader parses a landing folder and why
            parts.append(Text(f"flow {flow.name} reads {'; '.join(flow.source_names)}", "dim"))
        if flow.state == "failed":
            parts.append(Text(f"flow {flow.name} failed: {flow.error}", style="bold red"))
        elif flow.backpressure:
            parts.append(
                Text(
                    f"flow {flow.name}: input outpaced processing for "
                    f"{flow.pressure_streak} consecutive batches (backpressure)",
                    style="yellow",
                )
            )
    quality = quality_table(monitor, tables)
    if quality is not None:
        parts.append(quality)
    return Group(*parts)


def event_summary(event: dict[str, Any]) -> str:
    """The figures of a progress event, or the key facts of any other event, in one line."""
    details = event.get("details") or {}
    if event["event_type"] == "flow_progress":
        b = batch_figures(details)
        if b is None:
            return ""
        return (
            f"batch {b.batch_id} rows {b.input_rows} in {number(b.input_rps)}/s "
            f"processed {number(b.processed_rps)}/s took {millis(b.duration_ms)}"
        )
    if event["event_type"] == "expectations":
        rules = details.get("rules") or {}
        failed = sum(int(r.get("failed") or 0) for r in rules.values())
        quarantined = details.get("quarantined")
        return f"table {details.get('table')} failed {failed} quarantined {quarantined}"
    if "error" in details:
        error = headline(str(details["error"]))
        return "" if error == headline(event["message"]) else error
    return ""


def events_table(events: list[dict[str, Any]]) -> Table:
    table = Table(title="events", title_justify="left")
    for header in ("time (UTC)", "pipeline", "flow", "type", "level"):
        table.add_column(header, no_wrap=True)
    for header in ("message", "details"):
        table.add_column(header, overflow="fold")
    for e in events:
        table.add_row(*event_row(e), style=LEVEL_STYLES.get(e["level"], ""))
    return table


def event_row(event: dict[str, Any]) -> tuple[str, ...]:
    return (
        event["timestamp"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
        event["pipeline"],
        event.get("flow") or "",
        event["event_type"],
        event["level"],
        headline(event["message"]),
        event_summary(event),
    )


def event_json(event: dict[str, Any]) -> str:
    return json.dumps(event_record(event), default=str)
