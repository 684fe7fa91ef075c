"""``lakefeed table history|optimize|vacuum|info PATH``: Delta housekeeping without Spark."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lakefeed.delta import table as delta_table


def _console() -> Console:
    return Console(highlight=False)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _fail(error: Exception) -> None:
    raise click.ClickException(str(error)) from error


@click.group("table")
def table_group() -> None:
    """Inspect and maintain Delta tables (history, optimize, vacuum) without Spark."""


@table_group.command("info")
@click.argument("path", type=click.Path())
def info_command(path: str) -> None:
    """Version, files, rows, size, comment and properties of the table at PATH."""
    try:
        found = delta_table.info(path)
    except (FileNotFoundError, OSError) as error:
        _fail(error)
    grid = Table(title=f"Delta table {path}", show_header=False)
    grid.add_row("version", str(found.version))
    grid.add_row("files", str(found.files))
    grid.add_row("rows", "?" if found.rows is None else f"{found.rows:,}")
    grid.add_row("size", _size(found.size_bytes))
    grid.add_row("partitioned by", ", ".join(found.partition_columns) or "-")
    grid.add_row("comment", Text(found.description or "-"))  # user text: no markup
    for key, value in sorted(found.properties.items()):
        grid.add_row(Text(f"property {key}"), Text(value))
    _console().print(grid)


@table_group.command("history")
@click.argument("path", type=click.Path())
@click.option("-n", "--limit", type=int, default=20, show_default=True, help="Newest N commits.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def history_command(path: str, limit: int, as_json: bool) -> None:
    """Commits of the table at PATH, newest first."""
    try:
        entries = delta_table.history(path, limit)
    except (FileNotFoundError, OSError) as error:
        _fail(error)
    if as_json:
        click.echo(json.dumps(entries, default=str, indent=1))
        return
    grid = Table(title=f"History of {path}")
    for column in ("version", "timestamp (UTC)", "operation", "parameters", "metrics"):
        grid.add_column(column, overflow="fold")
    for entry in entries:
        params = entry.get("operationParameters") or {}
        metrics = entry.get("operationMetrics") or {}
        grid.add_row(
            str(entry["version"]),
            entry["timestamp"].strftime("%Y-%m-%d %H:%M:%S"),
            str(entry.get("operation", "?")),
            ", ".join(f"{k}={v}" for k, v in params.items()),
            ", ".join(f"{k}={v}" for k, v in metrics.items() if v not in (0, None)),
        )
    _console().print(grid)


@table_group.command("optimize")
@click.argument("path", type=click.Path())
@click.option("--target-size", type=int, default=None, help="Target file size in bytes.")
def optimize_command(path: str, target_size: int | None) -> None:
    """Compact small files of the table at PATH (streaming writes many)."""
    try:
        before = delta_table.info(path)
        metrics = delta_table.optimize(path, target_size=target_size)
        after = delta_table.info(path)
    except (FileNotFoundError, OSError) as error:
        _fail(error)
    grid = Table(title=f"OPTIMIZE {path}")
    grid.add_column("")
    grid.add_column("before", justify="right")
    grid.add_column("after", justify="right")
    grid.add_row("version", str(before.version), str(after.version))
    grid.add_row("files", str(before.files), str(after.files))
    grid.add_row("size", _size(before.size_bytes), _size(after.size_bytes))
    _console().print(grid)
    _console().print(
        f"files added {metrics.get('numFilesAdded', 0)}, removed "
        f"{metrics.get('numFilesRemoved', 0)}; run [bold]lakefeed table vacuum[/] later to "
        "delete the removed files once no reader needs them."
    )


@table_group.command("vacuum")
@click.argument("path", type=click.Path())
@click.option(
    "--retain-hours",
    type=float,
    default=delta_table.DEFAULT_RETENTION_HOURS,
    show_default=True,
    help="Keep files still needed by versions newer than this.",
)
@click.option(
    "--dry-run/--apply",
    default=True,
    show_default=True,
    help="List the files (default) or delete them.",
)
@click.option("--force", is_flag=True, help="Allow a retention below the safe default.")
def vacuum_command(path: str, retain_hours: float, dry_run: bool, force: bool) -> None:
    """Delete files of the table at PATH that no retained version references.

    Dry run by default (like Delta's DRY RUN): nothing is deleted without --apply.
    """
    try:
        files = delta_table.vacuum(path, retain_hours, dry_run=dry_run, force=force)
    except (FileNotFoundError, OSError, ValueError) as error:
        _fail(error)
    grid = Table(title=f"VACUUM {path} ({'dry run' if dry_run else 'applied'})")
    grid.add_column("file", overflow="fold")
    for name in files[:50]:
        grid.add_row(name)
    if len(files) > 50:
        grid.add_row(f"... and {len(files) - 50} more")
    _console().print(grid)
    verb = "would delete" if dry_run else "deleted"
    _console().print(
        f"{verb} {len(files)} file(s)" + (" (use --apply to delete)" if dry_run and files else "")
    )


COMMANDS = [table_group]
