"""``lakefeed state FLOW``: what a stateful flow keeps in Spark state, read from its checkpoint."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lakefeed.cli.observe import lakehouse_option
from lakefeed.core.errors import CheckpointError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.redact import redact
from lakefeed.runtime.state import FlowState, OperatorState, flow_checkpoint, inspect_state


@click.command("state")
@click.argument("flow")
@lakehouse_option
@click.option(
    "-n", "--limit", type=int, default=5, show_default=True, help="Sample rows per store."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@click.option("--master", default=None, help="Spark master (default local[*]).")
def state(flow: str, lakehouse_dir: str, limit: int, as_json: bool, master: str | None) -> None:
    """Operators, stores, key counts, bytes, sample keys/values and TTL of FLOW's state."""
    # deferred: a command loads what it runs, so the CLI starts fast
    from lakefeed.session import spark_session

    lakehouse = Lakehouse.at(lakehouse_dir)
    try:
        flow_checkpoint(lakehouse, flow)  # an unknown flow fails before paying for a Spark start
        spark = spark_session(app_name="lakefeed-state", master=master)
        found = inspect_state(spark, lakehouse, flow, limit)
    except CheckpointError as error:
        raise click.ClickException(str(error)) from error
    if as_json:
        click.echo(json.dumps(found.to_json(), indent=2))
    else:
        _print(found)


def _print(found: FlowState) -> None:
    console = Console(highlight=False)
    if not found.operators:
        console.print(Text(f"flow {found.flow} keeps no state (no stateful operator)"))
        return
    for op in found.operators:
        console.print(_operator_table(op))


def _operator_table(op: OperatorState) -> Table:
    grid = Table(title=f"operator {op.operator_id}: {op.name}", show_header=False)
    grid.add_row("partitions", str(op.partitions))
    grid.add_row("batches", f"{op.min_batch}..{op.max_batch}")
    grid.add_row("bytes on disk", f"{op.bytes_on_disk:,}")
    if op.memory_used_bytes is not None:
        grid.add_row("memory used (last batch)", f"{op.memory_used_bytes:,}")
    if op.rows_dropped_by_watermark is not None:
        grid.add_row("rows dropped by watermark", f"{op.rows_dropped_by_watermark:,}")
    for ttl in op.ttl:
        grid.add_row(Text(f"ttl {ttl['variable']}"), str(ttl["ttl_enabled"]))
    for store in op.stores:
        keys = "?" if store.keys is None else f"{store.keys:,}"
        grid.add_row(Text(f"store {store.name}"), Text(f"{keys} keys" + _error(store.error)))
        for row in store.sample:
            grid.add_row("", Text(json.dumps(redact(row))))
    return grid


def _error(error: str | None) -> str:
    return f" (unreadable: {error})" if error else ""


COMMANDS = [state]
