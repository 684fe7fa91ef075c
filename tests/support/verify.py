"""Run ``lakefeed verify`` as a user does (the CLI, in this process's SparkSession) and require
that every table is equal, with no traceback and no ``--conf`` beyond the pipeline's own."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from click.testing import CliRunner

from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import set_config


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


def write_cli_driver(path: Path, args: list[str]) -> Path:
    """A crash-test driver: ``lakefeed <args>`` in continuous mode, available-now on the final
    run of :func:`tests.support.crash.run_with_kills` (so it ends by itself)."""
    path.write_text(
        "import os\n"
        "from lakefeed.cli.main import cli\n"
        f"args = {[*args, '--mode', 'continuous', '--max-restarts', '30']!r}\n"
        "if os.environ.get('LAKEFEED_CRASH_RUN') == 'final':\n"
        "    args[args.index('continuous')] = 'available-now'\n"
        "cli(args, standalone_mode=True)\n"
    )
    return path


def commits(checkpoint: Path) -> int:
    """Batches committed in a streaming checkpoint."""
    folder = checkpoint / "commits"
    return len([p for p in folder.iterdir() if p.name.isdigit()]) if folder.is_dir() else 0
