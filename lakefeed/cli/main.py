"""Entry point of the ``lakefeed`` command; each concern contributes its commands.

A command module exposes ``COMMANDS``: a list of click commands or groups.
"""

from __future__ import annotations

import importlib

import click

from lakefeed import __version__
from lakefeed.cli.failures import DEBUG_KEY, FailureReporting
from lakefeed.core.logs import configure_logging

# One module per concern; each defines COMMANDS.
COMMAND_MODULES: tuple[str, ...] = (
    "lakefeed.cli.init",
    "lakefeed.cli.observe",
    "lakefeed.cli.kafka",
    "lakefeed.cli.pipeline",
    "lakefeed.cli.table",
    "lakefeed.cli.state",
    "lakefeed.cli.advise",
)


@click.group(cls=FailureReporting, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lakefeed")
@click.option("--log-level", default="WARNING", show_default=True, help="lakefeed log level.")
@click.option("--debug", is_flag=True, help="On failure, print the full Python and JVM trace.")
@click.pass_context
def cli(ctx: click.Context, log_level: str, debug: bool) -> None:
    """lakefeed: streaming lakehouse pipelines on PySpark and Delta Lake, no jars needed."""
    ctx.meta[DEBUG_KEY] = debug
    configure_logging(log_level)


for _module in COMMAND_MODULES:
    for _command in importlib.import_module(_module).COMMANDS:
        cli.add_command(_command)
