"""``lakefeed init``: a new project validates and its generated test passes, as a user runs
them (the CLI and pytest in subprocesses, from the project folder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lakefeed.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}


@pytest.mark.slow  # runs the generated project's pipeline and its pytest in subprocesses
def test_init_validate_and_the_generated_test_pass(tmp_path: Path) -> None:
    subprocess.run([BIN / "lakefeed", "init", "demo_proj"], cwd=tmp_path, env=_env(), check=True)
    project = tmp_path / "demo_proj"
    assert {p.name for p in (project / "pipeline").iterdir()} == {
        "readings.py",
        "device_stats.sql",
    }
    assert "lakefeed run pipeline" in (project / "README.md").read_text()
    checked = subprocess.run(
        [BIN / "lakefeed", "validate", "pipeline"],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    assert "pipeline is valid" in checked.stderr + checked.stdout
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
    )
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-2000:]
    assert "3 passed" in tested.stdout


def test_init_refuses_a_bad_name_or_a_used_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["init", "9lives"])
    assert result.exit_code == 1 and "not a Python identifier" in result.output
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "file").write_text("x")
    result = CliRunner().invoke(cli, ["init", "used"])
    assert result.exit_code == 1 and "is not empty" in result.output
    assert [p.name for p in (tmp_path / "used").iterdir()] == ["file"]
