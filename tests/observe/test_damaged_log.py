"""A damaged event log never fails a run, readers show what they can, and it can be mended.

The log is damaged the ways storage damages tables: garbage in the newest commit, a data file
deleted, a data file truncated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from lakefeed.cli.main import cli
from lakefeed.core.errors import EventLogError, code_of
from lakefeed.observe.server import start_server
from lakefeed.observe.tail import LiveMonitor
from lakefeed.runtime.event_log import EventLog, read_events, read_log
from tests.observe.progress import GRAPH, progress
from tests.observe.test_server_api import get
from tests.pipeline.support import table, write


def write_runs(path: Path, runs: int = 3) -> None:
    """``runs`` commits, each a run of pipeline ``iot`` with a start and a batch of flow bronze."""
    for i in range(runs):
        with EventLog(path, "iot", run_id=f"run{i}", flush_interval=60) as log:
            log.emit("run_start", f"run {i}", details={"mode": "once", "graph": GRAPH})
            log.emit("flow_start", "bronze", flow="bronze")
            log.emit(
                "flow_progress", "batch", flow="bronze", details=progress(i, datetime.now(UTC))
            )


def data_files(path: Path) -> list[Path]:
    """The log's data files, in commit order."""
    files = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                files.append(path / action["add"]["path"])
    return files


def damage(path: Path, how: str) -> None:
    if how == "commit":
        sorted((path / "_delta_log").glob("*.json"))[-1].write_text("garbage{")
    elif how == "deleted":
        data_files(path)[0].unlink()
    else:
        first = data_files(path)[0]
        first.write_bytes(first.read_bytes()[: first.stat().st_size // 2])


@pytest.fixture(params=["commit", "deleted", "truncated"])
def damaged(request, lakehouse):
    write_runs(lakehouse.event_log_path)
    damage(lakehouse.event_log_path, request.param)
    return lakehouse


def test_writing_to_a_damaged_log_warns_once_and_never_raises(lakehouse, capfd):
    write_runs(lakehouse.event_log_path)
    damage(lakehouse.event_log_path, "commit")
    with EventLog(lakehouse.event_log_path, "iot", flush_interval=0.01) as log:
        for i in range(5):
            log.emit("run_start", f"again {i}")
            log.flush()
    assert isinstance(log.error, EventLogError) and code_of(log.error) == "EVENT_LOG"
    assert log.dropped == 5
    err = capfd.readouterr().err
    assert err.count("lakefeed: warning:") == 1
    assert f"lakefeed event-log repair --lakehouse {lakehouse.root}" in err


def test_readers_show_what_they_can_and_say_what_is_wrong(damaged):
    path = damaged.event_log_path
    read = read_log(path)
    assert read.problems and read.table.num_rows >= 3  # two of three commits at least
    events = read_events(path)
    assert {e["run_id"] for e in events} >= {"run1"}
    live = LiveMonitor(path, min_interval=0)
    monitor = live.refresh()
    assert monitor.pipelines["iot"].flows["bronze"].batches >= 1
    assert monitor.event_log_problems == read.problems
    assert "lakefeed event-log repair" in (monitor.event_log_fix or "")


def test_ui_and_metrics_answer_for_a_damaged_log(damaged):
    server = start_server(damaged, port=0)
    try:
        status, _, body = get(server.url + "api/state")
        assert status == 200
        state = json.loads(body)
        assert state["pipelines"][0]["name"] == "iot"
        assert state["event_log_problems"] and "repair" in state["event_log_fix"]
        assert get(server.url + "api/events")[0] == 200
        status, _, body = get(server.url + "metrics")
        assert status == 200
        samples = {
            s.name: s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples
        }
        assert samples["lakefeed_event_log_problems"] >= 1
    finally:
        server.stop()


def test_status_and_events_commands_show_the_damage(damaged):
    runner = CliRunner()
    where = ["--lakehouse", str(damaged.root)]
    status = runner.invoke(cli, ["status", *where, "--once"])
    assert status.exit_code == 0, status.output
    assert "event log:" in status.output and "lakefeed event-log repair" in status.output
    assert "bronze" in status.output
    events = runner.invoke(cli, ["events", *where])
    assert events.exit_code == 0, events.output
    assert "event log:" in events.output and "run_start" in events.output


def test_repair_keeps_what_can_be_read_and_moves_the_old_log_aside(damaged):
    readable = read_log(damaged.event_log_path).table.num_rows
    result = CliRunner().invoke(cli, ["event-log", "repair", "--lakehouse", str(damaged.root)])
    assert result.exit_code == 0, result.output
    assert f"{readable} events kept" in result.output
    repaired = read_log(damaged.event_log_path)
    assert repaired.problems == [] and repaired.table.num_rows == readable
    (aside,) = damaged.root.glob("event_log.damaged-*")
    assert (aside / "_delta_log").is_dir()
    with EventLog(damaged.event_log_path, "iot") as log:
        log.emit("run_stop", "writes work again")
    assert log.error is None
    assert read_events(damaged.event_log_path)[-1]["event_type"] == "run_stop"


def test_reset_starts_an_empty_log(damaged):
    result = CliRunner().invoke(cli, ["event-log", "reset", "--lakehouse", str(damaged.root)])
    assert result.exit_code == 0, result.output
    assert read_events(damaged.event_log_path) == []
    assert len(list(damaged.root.glob("event_log.damaged-*"))) == 1


PIPELINE = """
import lakefeed as lf

@lf.table
def readings():
    return lf.source("iot", rowsPerSecond=100, totalRows=200,
                     startTime="2026-01-01T00:00:00Z")
"""


@pytest.mark.spark
def test_a_run_with_a_damaged_event_log_succeeds_and_says_so_once(lakehouse, tmp_path):
    write_runs(lakehouse.event_log_path)
    damage(lakehouse.event_log_path, "commit")
    folder = write(tmp_path / "pipeline", {"p.py": PIPELINE})
    command = [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", "run"]
    command += [str(folder), "--lakehouse", str(lakehouse.root), "--mode", "available-now"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.count("lakefeed: warning:") == 1
    assert "lakefeed event-log repair" in done.stderr
    assert table(lakehouse, "readings").num_rows == 200


def test_a_running_reader_sees_the_repaired_log(damaged):
    live = LiveMonitor(damaged.event_log_path, min_interval=0)
    assert live.refresh().event_log_problems
    readable = read_log(damaged.event_log_path).table.num_rows
    CliRunner().invoke(cli, ["event-log", "repair", "--lakehouse", str(damaged.root)])
    with EventLog(damaged.event_log_path, "iot", run_id="after") as log:
        log.emit("run_stop", "after the repair")
    monitor = live.refresh()
    assert monitor.event_log_problems == [] and monitor.event_log_fix is None
    assert monitor.events_seen == readable + 1
    assert monitor.pipelines["iot"].state == "stopped"
