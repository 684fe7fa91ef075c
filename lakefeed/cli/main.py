"""Entry point of the ``lakefeed`` command; each concern contributes its commands.

A command module exposes ``COMMANDS``: a list of click commands or groups.
"""

from __future__ import annotations

import importlib

import click

from lakefeed import __version__
from lakefeed.observe.logs import configure_logging

# One module per concern; each defines COMMANDS.
COMMAND_MODULES: tuple[str, ...] = (
    "lakefeed.cli.observe",
    "lakefeed.cli.kafka",
    "lakefeed.cli.pipeline",
    "lakefeed.cli.table",
    "lakefeed.cli.state",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lakefeed")
@click.option("--log-level", default="WARNING", show_default=True, help="lakefeed log level.")
def cli(log_level: str) -> None:
    """lakefeed: streaming lakehouse pipelines on PySpark and Delta Lake, no jars needed."""
    configure_logging(log_level)


for _module in COMMAND_MODULES:
    for _command in importlib.import_module(_module).COMMANDS:
        cli.add_command(_command)
