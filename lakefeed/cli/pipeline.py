"""``lakefeed run``, ``validate``, ``verify``, ``plan``, ``demo``: pipelines from a shell."""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from lakefeed import entry
from lakefeed.cli.failures import debugging, quiet_spark_failure_logs
from lakefeed.core.config import UI_TOKEN_ENV
from lakefeed.core.errors import LakefeedError
from lakefeed.core.explain import explain, readable
from lakefeed.core.lakehouse import DEFAULT_ROOT, Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.kinds import RunMode, choices
from lakefeed.pipeline.loader import PipelineFiles
from lakefeed.runtime.results import ConnectionCheck, FlowVerdict, TableComparison, ValidationResult
from lakefeed.spark.connect import is_connect

console = Console(stderr=True)
# The package's examples/ links to the repository's examples/ (one copy; a wheel holds the files),
# so the demo runs the same pipeline from a clone and after a plain pip install.
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _conf(values: Sequence[str]) -> dict[str, str]:
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r}: write key=value", param_hint="--conf")
        pairs[key.strip()] = value.strip()
    return pairs


def _find(paths: Sequence[str], conf: Sequence[str]) -> PipelineFiles:
    """The pipeline's files, name and spec (its code runs later, on the session)."""
    return entry.find(list(paths), _conf(conf))


def _spark(  # noqa: ANN202
    master: str | None,
    app: str,
    spark_conf: Sequence[str] = (),
    lakehouse: Lakehouse | None = None,
    remote: str | None = None,
    pipeline: PipelineFiles | None = None,
):
    """The session the pipeline's code will be imported on, started before any of it runs."""
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.session import spark_session
    from lakefeed.spark.cluster import parse_spark_conf

    conf = parse_spark_conf(spark_conf)
    storage: list[str] = []
    if lakehouse is not None:  # the pipeline's files may name S3 locations too
        found = pipeline and entry.storage_locations(pipeline, lakehouse)
        storage = found or [str(lakehouse.root)]
    spark = spark_session(
        app_name=f"lakefeed-{app}", master=master, conf=conf, storage=storage, remote=remote
    )
    quiet_spark_failure_logs(spark)
    return spark


def _fail(error: PipelineError | LakefeedError) -> None:
    if debugging():
        console.print(explain(error).trace, markup=False, highlight=False)
    console.print("[bold red]pipeline refused:[/]")
    problems = error.problems if isinstance(error, PipelineError) else [str(error)]
    for problem in problems:
        console.print(f"  - {readable(problem)}", markup=False, highlight=False)
    sys.exit(2)


pipeline_args = click.argument("paths", nargs=-1, required=True, metavar="PIPELINE...")
lakehouse_opt = click.option(
    "--lakehouse",
    "lakehouse_dir",
    default=None,
    help="Folder holding the tables, checkpoints, schemas and event log "
    f"[default: the spark-pipeline.yml's storage, else ./{DEFAULT_ROOT}]",
)
conf_opt = click.option(
    "--conf",
    "-c",
    "conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="Pipeline configuration: lakefeed.config(key), and spark.conf.get(key) as in DLT.",
)
master_opt = click.option(
    "--master", default=None, help="Spark master: local[*] (default), spark://HOST:PORT, ..."
)
remote_opt = click.option(
    "--remote",
    default=None,
    metavar="sc://HOST:PORT",
    help="Run through this Spark Connect server (default: $SPARK_REMOTE when no --master).",
)
spark_conf_opt = click.option(
    "--spark-conf",
    "spark_conf",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Spark setting for this run (repeatable), e.g. spark.executor.memory=2g.",
)


@dataclasses.dataclass(frozen=True)
class Target:
    """What every pipeline command is given: the pipeline's files, its lakehouse, its
    configuration and where Spark runs (``--remote`` and ``--spark-conf`` where it takes them)."""

    paths: tuple[str, ...]
    lakehouse_dir: str | None
    conf: tuple[str, ...]
    master: str | None
    remote: str | None = None
    spark_conf: tuple[str, ...] = ()

    def find(self) -> PipelineFiles:
        return _find(self.paths, self.conf)

    def spark(self, found: PipelineFiles, lakehouse: Lakehouse):  # noqa: ANN201 - SparkSession
        return _spark(self.master, found.name, self.spark_conf, lakehouse, self.remote, found)


def pipeline_command(spark_options: bool = True) -> Callable[[Callable], Callable]:
    """The arguments and options every pipeline command shares, given to it as one
    :class:`Target` (its first parameter, ``target``); ``spark_options``: it takes
    ``--remote`` and ``--spark-conf`` too."""
    shared = [pipeline_args, lakehouse_opt, conf_opt, master_opt]
    if spark_options:
        shared += [remote_opt, spark_conf_opt]

    def decorate(command: Callable) -> Callable:
        @functools.wraps(command)
        def with_target(
            paths: tuple[str, ...],
            lakehouse_dir: str | None,
            conf: tuple[str, ...],
            master: str | None,
            remote: str | None = None,
            spark_conf: tuple[str, ...] = (),
            **rest: Any,
        ) -> Any:
            target = Target(paths, lakehouse_dir, conf, master, remote, spark_conf)
            return command(target, **rest)

        for option in reversed(shared):  # as if stacked above the command, in this order
            with_target = option(with_target)
        return with_target

    return decorate


@click.command()
@pipeline_command()
@click.option(
    "--mode",
    type=click.Choice(choices(RunMode)),
    default=RunMode.CONTINUOUS.value,
    show_default=True,
    help="continuous: until stopped; available-now: what is there, then stop; once: one "
    "micro-batch per flow; backfill: the same queries in batch, replacing the tables.",
)
@click.option(
    "--trigger-interval",
    default="5 seconds",
    show_default=True,
    help="processingTime of continuous flows.",
)
@click.option("--duration", type=float, default=None, help="Stop a continuous run after N s.")
@click.option(
    "--full-refresh",
    "full_refresh",
    multiple=True,
    metavar="TABLE[,TABLE...]",
    help="Reset TABLE (data, quarantine, checkpoint) before running; repeatable.",
)
@click.option("--full-refresh-all", is_flag=True, help="Reset every table of the pipeline.")
@click.option(
    "--max-restarts",
    default=5,
    show_default=True,
    help="Restarts of a failing flow (exponential backoff) before giving up on it.",
)
@click.option("--ui", is_flag=True, help="Serve the web UI while running.")
@click.option("--ui-port", default=8765, show_default=True, help="Port of the web UI (--ui).")
@click.option(
    "--ui-host",
    default="127.0.0.1",
    show_default=True,
    help="Address the web UI binds (--ui); off loopback it needs --ui-token.",
)
@click.option(
    "--ui-token",
    default=None,
    envvar=UI_TOKEN_ENV.key,
    help="Access token of the web UI (16+ characters; env LAKEFEED_UI_TOKEN).",
)
def run(
    target: Target,
    mode: str,
    trigger_interval: str,
    duration: float | None,
    full_refresh: tuple[str, ...],
    full_refresh_all: bool,
    max_restarts: int,
    ui: bool,
    ui_port: int,
    ui_host: str,
    ui_token: str | None,
) -> None:
    """Run a pipeline (.py/.sql files or a folder) in the chosen mode.

    Exits 0 when every flow completed or was stopped; 1 when a flow failed, another run took
    the lakehouse's lease over, or on an unexpected error; 2 when refused before writing (a
    pipeline that does not load or validate, a checkpoint guard, the lease held by another run).
    """
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.runtime.lease import check_free

    server = None
    try:
        found = target.find()
        lakehouse = entry.lakehouse_for(target.lakehouse_dir, found)
        if ui:  # before Spark starts: a weak token or a busy port is refused at once
            server = _start_ui(lakehouse, ui_host, ui_port, ui_token)
        check_free(lakehouse)  # refused before a Spark session starts
        spark = target.spark(found, lakehouse)
        try:
            result = entry.run(
                list(target.paths),
                lakehouse=lakehouse,
                conf=_conf(target.conf),
                mode=mode,
                spark=spark,
                trigger_interval=trigger_interval,
                duration=duration,
                full_refresh=full_refresh,
                full_refresh_all=full_refresh_all,
                max_restarts=max_restarts,
            )
        finally:
            spark.stop()  # drains the listener bus before this process exits
    except (PipelineError, LakefeedError) as error:
        _fail(error)
        return
    finally:
        if server is not None:
            server.stop()
    console.print(f"run {result.run_id} {mode}: {result.reason}")
    for flow in result.flows:
        console.print(f"  {flow.name}: {flow.status}, {flow.rows_written:,} rows written")
    if result.failed:
        console.print(f"[red]failed flows: {', '.join(result.failed)}[/]")
        for flow in result.flows:
            if flow.error:
                why = readable(flow.error)
                console.print(f"  {flow.name}: {why}", markup=False, highlight=False)
    if result.lease_lost:
        console.print(
            "[red]another run took this lakehouse's lease over: this run stopped after its "
            "last committed batch (nothing committed is lost; the other run goes on)[/]"
        )
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.runtime.shutdown import exit_now

    exit_now(0 if result.ok else 1)


def _start_ui(lakehouse: Lakehouse, host: str, port: int, token: str | None):  # noqa: ANN202
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.cli.observe import ui_session
    from lakefeed.observe.server import start_server

    try:
        server = start_server(lakehouse, host=host, port=port, token=token, spark=ui_session)
    except (ValueError, OSError) as e:
        raise click.UsageError(str(e)) from e
    console.print(f"web UI: {server.url}")
    return server


@click.command()
@pipeline_command()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print datasets, flows, edges, output modes and problems as one JSON document.",
)
@click.option(
    "--check-connections",
    is_flag=True,
    help="Also check that Kafka brokers answer, input paths and Delta source tables exist.",
)
def validate(
    target: Target,
    as_json: bool,
    check_connections: bool,
) -> None:
    """Check a pipeline without starting any query: graph, output modes, misuse.

    Exits 2 when the pipeline would be refused (also with --json, whose document then lists
    the problems).
    """
    paths = list(target.paths)
    try:
        found = target.find()
    except PipelineError:  # files or syntax: a result listing the problems, without Spark
        result = entry.validate(paths, lakehouse=target.lakehouse_dir, conf=_conf(target.conf))
    else:
        lakehouse = entry.lakehouse_for(target.lakehouse_dir, found)
        result = entry.validate(
            paths,
            lakehouse=lakehouse,
            conf=_conf(target.conf),
            spark=target.spark(found, lakehouse),
            check_connections=check_connections,
        )
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        sys.exit(0 if result.ok else 2)
    if result.datasets:
        Console().print(_graph_table(result))
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    if check_connections:
        _report_connections(result.connections)
    if result.problems:
        error = PipelineError(list(result.problems))
        error.__cause__ = next(iter(result.causes.values()), None)
        _fail(error)
    console.print("[green]pipeline is valid[/]")


def _graph_table(result: ValidationResult) -> Table:
    table = Table(title=f"pipeline {result.pipeline}")
    for column in ("dataset", "kind", "reads", "output mode", "stateful"):
        table.add_column(column)
    datasets = {d.name: d for d in result.datasets}
    flows = {f.name: f for f in result.flows}
    for name in result.order or list(datasets):
        flow = flows.get(name)
        table.add_row(
            name,
            datasets[name].kind,
            ", ".join(datasets[name].reads) or "-",
            (flow.output_mode or "-") if flow else "-",
            str(len(flow.stateful)) if flow else "-",
        )
    return table


def _report_connections(checks: Sequence[ConnectionCheck]) -> None:
    """Print a per-flow table of connection checks (the failed ones are also problems)."""
    table = Table(title="connections")
    for column in ("flow", "source", "result", "detail"):
        table.add_column(column)
    for check in checks:
        result = "[green]ok[/]" if check.ok else "[red]FAILED[/]"
        table.add_row(check.flow, escape(check.target), result, escape(readable(check.detail)))
    Console().print(table if checks else "no outside sources to check")


@click.command()
@pipeline_command()
@click.option(
    "--no-run",
    is_flag=True,
    help="Compare the tables as they are (default: catch up with available-now first).",
)
def verify(target: Target, no_run: bool) -> None:
    """Compare each streaming table with a batch recompute over the same input.

    Exits 1 when a table is not equal, 2 when refused before it compared anything.
    """
    try:
        found = target.find()
        lakehouse = entry.lakehouse_for(target.lakehouse_dir, found)
        result = entry.verify(
            list(target.paths),
            lakehouse=lakehouse,
            conf=_conf(target.conf),
            spark=target.spark(found, lakehouse),
            run_first=not no_run,
        )
    except (PipelineError, LakefeedError) as error:
        _fail(error)
        return
    table = Table(title="stream vs batch")
    for column in (
        "table",
        "stream rows",
        "batch rows",
        "only stream",
        "only batch",
        "pending",
        "result",
    ):
        table.add_column(column)
    for diff in result.tables:
        table.add_row(
            diff.table,
            str(diff.stream_rows),
            str(diff.batch_rows),
            str(diff.only_stream),
            str(diff.only_batch),
            str(diff.pending),
            _verdict(diff),
        )
    Console().print(table)
    for diff in result.tables:
        if diff.inconsistent:
            console.print(f"{diff.table}: {diff.inconsistent}", markup=False, highlight=False)
        if diff.note:
            console.print(f"{diff.table}: {diff.note}", highlight=False)
        for sample in diff.samples:
            console.print(f"  {diff.table} {sample}", markup=False, highlight=False)
    if not result.ok:
        sys.exit(1)


def _verdict(diff: TableComparison) -> str:
    if diff.inconsistent:
        return "[red]INCONSISTENT[/]"
    if diff.excluded:
        return "not compared"
    if not diff.verified:
        return "[yellow]NOT VERIFIED[/]"
    return "[green]equal[/]" if diff.equal else "[red]DIFFERENT[/]"


@click.command()
@pipeline_command(spark_options=False)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON document.")
def plan(target: Target, as_json: bool) -> None:
    """Before a deploy: keep, compatible change or full refresh, for every flow.

    Compares the pipeline code with what the lakehouse holds (checkpoints, state shapes, Delta
    schemas, output modes); writes nothing. Exits 2 when `run` would refuse.
    """
    try:
        result = entry.plan(
            list(target.paths),
            lakehouse=target.lakehouse_dir,
            conf=_conf(target.conf),
            master=target.master,
        )
    except (PipelineError, LakefeedError) as error:
        _fail(error)
        return
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(result), indent=2))
        sys.exit(0 if result.ok else 2)
    table = Table(title=f"plan for {result.pipeline}")
    for column in ("flow", "verdict", "why", "read again"):
        table.add_column(column, overflow="fold")
    for change in result.flows:
        colour = _PLAN_COLOURS.get(change.verdict, "white")
        table.add_row(
            change.flow,
            f"[{colour}]{change.verdict}[/]",
            escape("\n".join(change.reasons)),
            change.reprocessed,
        )
    Console().print(table)
    for problem in result.problems:
        console.print(f"  - {readable(problem)}", markup=False, highlight=False)
    if result.refresh():
        tables = ",".join(result.refresh())
        console.print(
            f"run would refuse: `lakefeed run PIPELINE --full-refresh {tables}`",
            markup=False,
            highlight=False,
        )
    if not result.ok:
        sys.exit(2)


_PLAN_COLOURS = {
    FlowVerdict.KEEP: "green",
    FlowVerdict.COMPATIBLE: "cyan",
    FlowVerdict.RESET: "yellow",
    FlowVerdict.REFRESH: "red",
}


@click.command()
@lakehouse_opt
@master_opt
@click.option("--duration", default=60.0, show_default=True, help="Seconds of streaming.")
@click.option(
    "--rows-per-second",
    default=200,
    show_default=True,
    help="Rows the IoT generator makes a second.",
)
@click.option(
    "--backlog-minutes",
    default=11.0,
    show_default=True,
    help="Start the generator this far in the past, so gold windows close during the demo.",
)
def demo(
    lakehouse_dir: str,
    master: str | None,
    duration: float,
    rows_per_second: int,
    backlog_minutes: float,
) -> None:
    """Run the IoT example pipeline with a live view, then show what landed in each table.

    Each demo starts over (its tables are reset): the generator's start time is part of the
    stream's identity, and a new demo starts the clock again.
    """
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.runtime.runner import PipelineRunner, RunOptions

    folder = EXAMPLES / "iot"
    if not folder.is_dir():
        raise click.ClickException(
            f"demo pipeline not found at {folder}: this installation of lakefeed is incomplete; "
            "reinstall it (pip install --force-reinstall lakefeed)"
        )
    start = datetime.now(UTC) - timedelta(minutes=backlog_minutes)
    conf = [
        f"iot.rowsPerSecond={rows_per_second}",
        f"iot.startTime={start.isoformat()}",
        f"iot.maxRowsPerTrigger={max(rows_per_second * 180, 1000)}",
    ]
    try:
        found = _find([str(folder)], conf)
        lakehouse = entry.lakehouse_for(lakehouse_dir, found)
        spark = _spark(master, "demo")
        if not is_connect(spark):  # SPARK_REMOTE: the server logs as it is configured
            spark.sparkContext.setLogLevel("ERROR")
        pipeline = entry.load([str(folder)], spark=spark)
        view = DemoView(lakehouse)
        options = RunOptions(
            mode="continuous",
            trigger_interval="2 seconds",
            duration=duration,
            full_refresh_all=True,
        )
        with Live(view.render(None), console=console, refresh_per_second=2) as live:
            runner = PipelineRunner(
                pipeline, lakehouse, spark, options, on_tick=lambda r: live.update(view.render(r))
            )
            result = runner.run()
    except PipelineError as error:
        _fail(error)
        return
    console.print(f"demo stopped: {result.reason}; lakehouse at {lakehouse.root}")
    show_tables(lakehouse)
    spark.stop()
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.runtime.shutdown import exit_now

    exit_now(1 if result.failed else 0)


class DemoView:
    """Per flow: batches, input and processed rows/s, last batch, rows in the table."""

    def __init__(self, lakehouse: Lakehouse) -> None:
        self.lakehouse = lakehouse
        self.started = time.monotonic()
        self._counts: dict[str, str] = {}
        self._counted_at = 0.0

    def render(self, runner) -> Table:  # noqa: ANN001 - PipelineRunner
        elapsed = time.monotonic() - self.started
        table = Table(title=f"lakefeed demo — IoT pipeline ({elapsed:.0f}s)")
        for column in (
            "flow",
            "state",
            "batches",
            "input rows/s",
            "processed rows/s",
            "batch ms",
            "watermark",
            "rows in table",
        ):
            table.add_column(column, justify="right" if column != "flow" else "left")
        if runner is None:
            return table
        if time.monotonic() - self._counted_at > 3:
            self._counts = {n: table_rows(self.lakehouse, n) for n in runner.pipeline.datasets}
            for dataset in runner.pipeline.datasets.values():
                if dataset.quarantine:
                    self._counts[dataset.quarantine] = table_rows(
                        self.lakehouse, dataset.quarantine
                    )
            self._counted_at = time.monotonic()
        for name, state in runner.flows.items():
            query = state.query
            progress = query.lastProgress if query is not None else None
            status = (
                "running"
                if query is not None and query.isActive
                else ("failed" if state.failed else "stopped")
            )
            p = progress or {}
            table.add_row(
                name,
                status,
                str(p.get("batchId", "-")),
                f"{p.get('inputRowsPerSecond', 0):,.0f}",
                f"{p.get('processedRowsPerSecond', 0):,.0f}",
                str((p.get("durationMs") or {}).get("triggerExecution", "-")),
                str((p.get("eventTime") or {}).get("watermark", "-")),
                self._counts.get(name, "0"),
            )
        for name, count in self._counts.items():
            if name.endswith("_quarantine"):
                table.add_row(name, "", "", "", "", "", "", count)
        return table


def table_rows(lakehouse: Lakehouse, name: str) -> str:
    """Rows from Delta file statistics (no Spark job); ``?`` when a file has none."""
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.delta import table as delta_table

    rows = delta_table.row_count(lakehouse.table_path(name))
    return "?" if rows is None else f"{rows:,}"


def show_tables(lakehouse: Lakehouse, rows: int = 5) -> None:
    """A sample of each table, read with delta-rs."""
    # deferred: a command loads what it runs, so the CLI starts fast
    from deltalake import DeltaTable

    out = Console()
    for name in lakehouse.published_table_names():
        data = DeltaTable(str(lakehouse.table_path(name))).to_pyarrow_table()
        sample = Table(title=f"{name}: {data.num_rows:,} rows")
        columns = [c for c in data.column_names if c not in ("value",)][:9]
        for column in columns:
            sample.add_column(column)
        for row in data.select(columns).slice(max(0, data.num_rows - rows)).to_pylist():
            sample.add_row(*[_cell(row[c]) for c in columns])
        out.print(sample)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)[:40]


COMMANDS = [run, validate, verify, plan, demo]
