"""``lakefeed status`` and ``lakefeed events`` over a real event log."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import write_deltalake

from lakefeed.cli.main import cli
from lakefeed.runtime.event_log import EventLog
from tests.observe.progress import GRAPH, progress


def write_run(lakehouse) -> None:
    now = datetime.now(UTC)
    with EventLog(lakehouse.event_log_path, "iot", flush_interval=60) as log:
        log.emit("run_start", "run", details={"mode": "available-now", "graph": GRAPH})
        sources = ["landing folder /in, read by Spark's reader (the default: ...)"]
        log.emit("flow_start", "bronze", flow="bronze", details={"sources": sources})
        log.emit(
            "flow_progress",
            "batch",
            flow="bronze",
            details=progress(4, now, input_rps=1234.0, processed_rps=5678.0, state_rows=15000),
        )
        log.emit(
            "expectations",
            "checked",
            flow="bronze",
            details={
                "table": "bronze",
                "rules": {"valid_temp": {"action": "fail", "passed": 7, "failed": 1}},
                "quarantined": 0,
            },
        )
        log.emit("flow_failed", "boom", flow="gold", level="ERROR", details={"error": "OOM"})
    write_deltalake(str(lakehouse.table_path("bronze_quarantine")), pa.table({"id": [1, 2, 3]}))


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_status_prints_flow_figures_and_errors(lakehouse):
    write_run(lakehouse)
    out = run("status", "--lakehouse", str(lakehouse.root), "--once")
    assert "pipeline iot" in out and "available-now" in out
    bronze = next(line for line in out.splitlines() if "bronze" in line and "running" in line)
    for figure in ("1234", "5678", "200 ms", "15.0k"):
        assert figure in bronze
    assert "flow gold failed: OOM" in out
    assert "flow bronze reads landing folder /in, read by Spark's reader" in out
    assert "1 failed" in out  # expectations table: fail rule
    assert "3 rows in bronze_quarantine" in out


def test_events_filters_and_json(lakehouse):
    write_run(lakehouse)
    out = run("events", "--lakehouse", str(lakehouse.root), "-n", "2")
    assert "flow_failed" in out and "expectations" in out and "run_start" not in out
    lines = run(
        "events", "--lakehouse", str(lakehouse.root), "--json", "--type", "flow_progress"
    ).splitlines()
    (record,) = [json.loads(line) for line in lines]
    assert record["details"]["batchId"] == 4 and record["flow"] == "bronze"
    out = run("events", "--lakehouse", str(lakehouse.root), "--flow", "bronze", "-n", "5")
    assert "batch 4 rows 100 in 1234/s processed 5678/s" in out
    assert "gold" not in out


def test_status_shows_late_rows_per_flow_human_and_json(lakehouse):
    """Rows a flow's watermark made late: dropped (Spark's count in each progress) and kept in
    ``<table>_late``, in the flow table and in ``--json``."""
    now = datetime.now(UTC)
    with EventLog(lakehouse.event_log_path, "fraud", flush_interval=60) as log:
        log.emit("run_start", "run", details={"mode": "available-now", "graph": GRAPH})
        for batch, dropped in ((0, 1200), (1, 34)):
            figures = progress(batch, now, state_rows=10, dropped=dropped)
            log.emit("flow_progress", "batch", flow="alerts", details=figures)
        log.emit("late_rows", "kept", flow="alerts", details={"batch_id": 1, "kept": 5})
    where = ["--lakehouse", str(lakehouse.root)]
    out = run("status", *where, "--once")
    assert "late drops" in out
    alerts = next(line for line in out.splitlines() if " alerts " in line)
    assert "1234 (+5 kept)" in alerts
    (pipeline,) = json.loads(run("status", *where, "--json"))["pipelines"]
    (flow,) = pipeline["flows"]
    assert (flow["name"], flow["dropped_late_total"], flow["kept_late_total"]) == (
        "alerts",
        1234,
        5,
    )
    assert flow["last"]["dropped_late"] == 34 and "series" not in flow


def test_empty_lakehouse_says_so(lakehouse):
    assert "no events" in run("status", "--lakehouse", str(lakehouse.root), "--once")
    assert "no events" in run("events", "--lakehouse", str(lakehouse.root))


@pytest.mark.slow  # a server in a subprocess
def test_ui_command_serves_until_interrupted(lakehouse):
    write_run(lakehouse)
    command = [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", "ui", "--port=0"]
    env = {**os.environ, "LAKEFEED_LAKEHOUSE": str(lakehouse.root)}
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) as proc:
        try:
            line = proc.stdout.readline()
            url = line.split(" on ", 1)[1].split(";", 1)[0]
            with urllib.request.urlopen(url + "api/state", timeout=10) as response:
                assert json.load(response)["pipelines"][0]["name"] == "iot"
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 0


def test_ui_command_refuses_a_public_address_without_token(lakehouse):
    result = CliRunner().invoke(
        cli, ["ui", "--lakehouse", str(lakehouse.root), "--host", "0.0.0.0", "--port", "0"]
    )
    assert result.exit_code == 2 and "set a token" in result.output


@pytest.mark.slow  # a server in a subprocess
def test_events_follow_prints_new_events_as_they_arrive(lakehouse):
    write_run(lakehouse)
    command = [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", "events"]
    command += ["--lakehouse", str(lakehouse.root), "-n", "1", "--json", "--follow"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert json.loads(proc.stdout.readline())["event_type"] == "flow_failed"  # latest
            with EventLog(lakehouse.event_log_path, "iot") as log:
                log.emit("run_stop", "done", details={"reason": "finished"})
            assert json.loads(proc.stdout.readline())["details"] == {"reason": "finished"}
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 0


def test_ui_command_refuses_a_weak_token(lakehouse):
    command = ["ui", "--lakehouse", str(lakehouse.root), "--host", "0.0.0.0", "--port", "0"]
    result = CliRunner().invoke(cli, [*command, "--token", " "])
    assert result.exit_code == 2 and "too weak" in result.output


@pytest.mark.slow  # a server in a subprocess
def test_ui_command_generates_and_prints_a_token(lakehouse):
    write_run(lakehouse)
    command = [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", "ui"]
    command += ["--lakehouse", str(lakehouse.root), "--host", "0.0.0.0", "--port", "0"]
    command += ["--generate-token"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        try:
            token = proc.stdout.readline().rsplit(": ", 1)[1].strip()
            port = re.search(r"http://0\.0\.0\.0:(\d+)/", proc.stdout.readline()).group(1)
            url = f"http://127.0.0.1:{port}/api/state"
            assert len(token) >= 16
            with pytest.raises(urllib.error.HTTPError, match="401"):
                urllib.request.urlopen(url, timeout=10)
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=10) as response:
                assert json.load(response)["pipelines"][0]["name"] == "iot"
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 0


def test_run_with_the_ui_refuses_a_weak_token_before_starting(lakehouse):
    iot = Path(__file__).resolve().parents[2] / "examples" / "iot"
    command = ["run", str(iot), "--lakehouse", str(lakehouse.root), "--ui", "--ui-token", " "]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 2 and "too weak" in result.output
    assert not lakehouse.root.exists()
