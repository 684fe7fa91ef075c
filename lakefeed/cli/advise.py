"""``lakefeed advise watermark FLOW PIPELINE...``: a watermark delay from observed lateness."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from lakefeed import entry
from lakefeed.cli.pipeline import (
    _fail,
    _find,
    _spark,
    conf_opt,
    lakehouse_opt,
    master_opt,
    pipeline_args,
    spark_conf_opt,
)
from lakefeed.core.errors import LakefeedError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.advise import WatermarkAdvice, advise_watermark


@click.group()
def advise() -> None:
    """Advice on a flow's settings from the data it has seen."""


@advise.command("watermark")
@click.argument("flow")
@pipeline_args
@lakehouse_opt
@conf_opt
@master_opt
@spark_conf_opt
@click.option(
    "--completeness",
    type=float,
    default=99.9,
    show_default=True,
    help="Percentage of rows the watermark must let through on time.",
)
@click.option(
    "--event-time", default=None, help="SQL expression over the input (default: the watermark's)."
)
@click.option("--key", default=None, help="SQL expression of the state key (e.g. device_id).")
@click.option("--window", default=None, help="Window length of the aggregation, e.g. '5 minutes'.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def watermark(
    flow: str,
    paths: tuple[str, ...],
    lakehouse_dir: str,
    conf: tuple[str, ...],
    master: str | None,
    spark_conf: tuple[str, ...],
    completeness: float,
    event_time: str | None,
    key: str | None,
    window: str | None,
    as_json: bool,
) -> None:
    """A watermark delay for FLOW that keeps --completeness % of its input on time, read from
    the event-time lateness of its input tables in commit order, and the state it implies."""
    try:
        spark = _spark(master, _find(paths, conf).name, spark_conf)
        pipeline = entry.load(list(paths), spark=spark)
        found = advise_watermark(
            spark,
            pipeline,
            Lakehouse.at(lakehouse_dir),
            flow,
            completeness,
            event_time=event_time,
            key=key,
            window=window,
        )
    except (PipelineError, LakefeedError) as error:
        _fail(error)
        return
    if as_json:
        click.echo(json.dumps(found.to_json(), indent=2))
    else:
        Console(highlight=False).print(_table(found))


def _table(found: WatermarkAdvice) -> Table:
    grid = Table(title=f"watermark advice for {found.flow}", show_header=False)
    grid.add_row("input", ", ".join(found.inputs))
    grid.add_row("event time", found.event_time)
    grid.add_row("rows read", f"{found.rows:,}")
    quantiles = ", ".join(f"{k} {v:,.1f} s" for k, v in found.lateness_quantiles.items())
    grid.add_row("lateness", f"{quantiles}, max {found.max_lateness_seconds:,.1f} s")
    if found.current_delay is not None and found.on_time_with_current is not None:
        share = f"{100 * found.on_time_with_current:.3f} % on time"
        grid.add_row("current delay", f"{found.current_delay} ({share})")
    grid.add_row(
        f"advice for {found.completeness:g} %",
        f'withWatermark("{found.event_time}", "{found.delay_seconds} seconds")',
    )
    grid.add_row("state it implies", f"~{found.state_rows:,} rows ({found.state_basis})")
    return grid


COMMANDS = [advise]
