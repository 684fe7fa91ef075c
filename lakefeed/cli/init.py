"""``lakefeed init NAME``: scaffold a new, tested pipeline project."""

from __future__ import annotations

import click

from lakefeed.core.errors import LakefeedError
from lakefeed.scaffold import FILES, create_project


@click.command()
@click.argument("name")
def init(name: str) -> None:
    """Create project folder NAME: a pipeline (Python + SQL), its test and a README."""
    try:
        folder = create_project(name)
    except LakefeedError as error:
        raise click.ClickException(str(error)) from error
    for relative in FILES:
        click.echo(f"  created {folder / relative}")
    click.echo(
        f"\nNext:\n  cd {folder}\n  lakefeed run pipeline --mode available-now\n"
        "  python -m pip install pytest   # once, if this environment lacks it\n"
        "  python -m pytest tests"
    )


COMMANDS = [init]
