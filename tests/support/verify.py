"""Run ``lakefeed verify`` as a user does (the CLI, in this process's SparkSession) and require
that every table is equal, with no traceback and no ``--conf`` beyond the pipeline's own."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner

from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import set_config
from tests.support.crash import spark_commits as commits
from tests.support.crash import write_cli_driver

# The crash drivers' helpers moved to tests.support.crash; still importable from here.
__all__ = ["assert_verify_passes", "commits", "conf_args", "write_cli_driver"]


def conf_args(conf: Mapping[str, str]) -> list[str]:
    return [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]


def assert_verify_passes(
    pipeline: Path, lakehouse: Lakehouse, conf: Mapping[str, str], *, run_first: bool = False
) -> str:
    """``lakefeed verify`` exits 0 and reports every table equal; returns its output."""
    args = ["verify", str(pipeline), "--lakehouse", str(lakehouse.root), *conf_args(conf)]
    try:
        result = CliRunner().invoke(cli, args if run_first else [*args, "--no-run"])
    finally:
        set_config({})
    output = result.output
    assert result.exit_code == 0, f"{output}\n{result.exception!r}"
    assert "Traceback" not in output, output
    assert "DIFFERENT" not in output and "NOT VERIFIED" not in output, output
    return output
