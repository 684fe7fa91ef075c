"""``lakefeed ui``, ``status``, ``events`` and ``event-log``: look at a lakehouse's pipelines.

All read only the lakehouse folder (event log and Delta tables), so they work for a pipeline
running in another process and for one that has stopped. A damaged event log is shown as far as
it can be read, with what is wrong; ``lakefeed event-log repair|reset`` mends it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click
from rich.live import Live

from lakefeed.core.config import LAKEHOUSE_ENV, UI_TOKEN_ENV
from lakefeed.core.lakehouse import DEFAULT_ROOT, Lakehouse
from lakefeed.observe.console import (
    event_json,
    event_row,
    events_table,
    make_console,
    status_view,
)
from lakefeed.observe.tables import TableReader
from lakefeed.observe.tail import EventTail, LiveMonitor
from lakefeed.runtime.event_log import EVENT_TYPES, Mended, repair_hint, repair_log, reset_log

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

lakehouse_option = click.option(
    "--lakehouse",
    "lakehouse_dir",
    default=DEFAULT_ROOT,
    show_default=True,
    envvar=LAKEHOUSE_ENV.key,
    type=click.Path(file_okay=False),
    help="Lakehouse folder (tables, checkpoints, event log). Env: LAKEFEED_LAKEHOUSE.",
)


def ui_session() -> SparkSession:
    """The UI's session for Spark's state readers: one like the command's others."""
    from lakefeed.session import spark_session  # Spark loads on the first state request

    return spark_session(app_name="lakefeed-ui")


@click.command()
@lakehouse_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=int, help="Port (0: any free).")
@click.option(
    "--token",
    envvar=UI_TOKEN_ENV.key,
    default=None,
    help="Access token (16+ characters); required unless bound to a loopback address. "
    "Env: LAKEFEED_UI_TOKEN.",
)
@click.option(
    "--generate-token",
    is_flag=True,
    help="Make a random access token and print it once (instead of --token).",
)
def ui(lakehouse_dir: str, host: str, port: int, token: str | None, generate_token: bool) -> None:
    """Serve the web UI and Prometheus /metrics for a lakehouse until Ctrl-C."""
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.observe.server import new_token, start_server

    if generate_token:
        if token is not None:
            raise click.UsageError("give either --token or --generate-token, not both")
        token = new_token()
    try:
        handle = start_server(
            Lakehouse.at(lakehouse_dir), host=host, port=port, token=token, spark=ui_session
        )
    except (ValueError, OSError) as e:
        raise click.UsageError(str(e)) from e
    if generate_token:
        click.echo(f"lakefeed UI access token (shown once): {token}")
    note = " (open it with ?token=<your token>)" if token else ""
    click.echo(f"lakefeed UI on {handle.url}{note}; metrics at {handle.url}metrics")
    handle.wait()


@click.command()
@lakehouse_option
@click.option(
    "--watch/--once",
    default=None,
    help="Refresh the table live (default when the output is a terminal) or print it once.",
)
@click.option("--interval", default=2.0, show_default=True, help="Seconds between refreshes.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print once, as one JSON document (the web UI's /api/state, without chart series).",
)
def status(lakehouse_dir: str, watch: bool | None, interval: float, as_json: bool) -> None:
    """Each flow's state, rates, latency, watermark, state size, late rows and lag;
    expectation counts."""
    lakehouse = Lakehouse.at(lakehouse_dir)
    live = LiveMonitor(lakehouse.event_log_path, min_interval=0)
    if as_json:
        click.echo(json.dumps(live.refresh().snapshot(time.time(), series=None), default=str))
        return
    tables = TableReader(lakehouse)
    console = make_console()
    if watch is None:
        watch = console.is_terminal
    if not watch:
        console.print(status_view(live.refresh(), time.time(), tables))
        return
    with Live(status_view(live.refresh(), time.time(), tables), console=console) as screen:
        try:
            while True:
                time.sleep(interval)
                screen.update(status_view(live.refresh(), time.time(), tables))
        except KeyboardInterrupt:
            pass


@dataclass(frozen=True)
class EventFilter:
    types: frozenset[str]
    flow: str | None
    run_id: str | None
    since: datetime | None

    def matches(self, event: dict[str, Any]) -> bool:
        return (
            (not self.types or event["event_type"] in self.types)
            and (self.flow is None or event.get("flow") == self.flow)
            and (self.run_id is None or event.get("run_id") == self.run_id)
            and (self.since is None or event["timestamp"] > self.since)
        )


@click.command()
@lakehouse_option
@click.option("-n", "--limit", default=20, show_default=True, help="How many latest events.")
@click.option(
    "--type",
    "event_types",
    multiple=True,
    type=click.Choice(sorted(EVENT_TYPES)),
    help="Only these event types (repeatable).",
)
@click.option("--flow", default=None, help="Only this flow's events.")
@click.option("--run", "run_id", default=None, help="Only this run's events.")
@click.option("--since", default=None, type=float, help="Only events of the last N minutes.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events as they arrive.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def events(
    lakehouse_dir: str,
    limit: int,
    event_types: tuple[str, ...],
    flow: str | None,
    run_id: str | None,
    since: float | None,
    follow: bool,
    as_json: bool,
) -> None:
    """The latest events of the event log: runs, flow states, progress, expectations, errors."""
    since_at = datetime.now(UTC) - timedelta(minutes=since) if since is not None else None
    wanted = EventFilter(frozenset(event_types), flow, run_id, since_at)
    tail = EventTail(Lakehouse.at(lakehouse_dir).event_log_path)
    console = make_console()
    _, existing = tail.poll()
    _warn_problems(tail.problems, tail.path)
    latest = [e for e in existing if wanted.matches(e)][-limit:] if limit > 0 else []
    if as_json:
        for event in latest:
            click.echo(event_json(event))
    elif latest or not follow:
        console.print(events_table(latest) if latest else "no events")
    if not follow:
        return
    # After a rewrite of the log (reset) the tail returns everything again: skip what was shown.
    shown_until = existing[-1]["timestamp"] if existing else datetime.min.replace(tzinfo=UTC)
    try:
        while True:
            time.sleep(1.0)
            for event in tail.poll()[1]:
                if event["timestamp"] > shown_until and wanted.matches(event):
                    click.echo(event_json(event) if as_json else "  ".join(event_row(event)))
                shown_until = max(shown_until, event["timestamp"])
    except KeyboardInterrupt:
        pass


def _warn_problems(problems: list[str], path: str) -> None:
    for problem in problems:
        click.echo(f"event log: {problem}", err=True)
    if problems:
        click.echo(f"  fix: {repair_hint(path)}", err=True)


@click.group("event-log")
def event_log() -> None:
    """Mend a damaged event log (stop the lakehouse's pipelines first)."""


def _report(what: str, mended: Mended) -> None:
    for problem in mended.problems:
        click.echo(f"skipped: {problem}")
    aside = f"; the old log is at {mended.moved_to}" if mended.moved_to else ""
    click.echo(f"{what}{aside}")


@event_log.command()
@lakehouse_option
def repair(lakehouse_dir: str) -> None:
    """Keep every event that can be read in a fresh log; move the old one aside."""
    path = Lakehouse.at(lakehouse_dir).event_log_path
    mended = repair_log(path)
    _report(f"event log repaired: {mended.kept} events kept in {path}", mended)


@event_log.command()
@lakehouse_option
def reset(lakehouse_dir: str) -> None:
    """Start an empty event log; move the old one aside."""
    path = Lakehouse.at(lakehouse_dir).event_log_path
    _report(f"event log reset: {path} is empty", reset_log(path))


COMMANDS = [ui, status, events, event_log]
