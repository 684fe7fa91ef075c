"""kill -9 of ``lakefeed run --mode continuous`` mid-stream, restart, and the result is exact:
every source row once in bronze, and silver/gold equal to the batch recompute (``verify``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.verify import verify
from tests.pipeline.support import IOT, IOT_CONF, load, table
from tests.support.crash import DRIVER_JVM, run_cli_with_kills, spark_commits, write_cli_driver
from tests.support.verify import conf_args

CONF = {**IOT_CONF, "iot.maxRowsPerTrigger": "250"}


def _run_args(lakehouse: Lakehouse) -> list[str]:
    """``lakefeed run`` of the IoT example, a batch a second (a crash driver adds the mode)."""
    args = ["run", str(IOT), "--lakehouse", str(lakehouse.root), "--master", "local[2]"]
    return [*args, "--trigger-interval", "1 second", *conf_args(CONF)]


@pytest.mark.crash
@pytest.mark.timeout(1800)
def test_kill9_mid_stream_then_restart_matches_batch(spark, tmp_path: Path) -> None:
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    # Kill once bronze has committed a batch, then once silver has: mid-stream both times.
    watched = [
        lakehouse.checkpoint_path("bronze_readings"),
        lakehouse.checkpoint_path("silver_readings"),
    ]
    report = run_cli_with_kills(
        tmp_path,
        _run_args(lakehouse),
        kills=2,
        kill_when=lambda i: spark_commits(watched[i]) >= 1 + i,
        final_timeout=600,
    )
    assert report.kills == 2
    bronze = table(lakehouse, "bronze_readings")
    assert bronze.num_rows == 1500
    assert pc.count_distinct(bronze["offset"]).as_py() == 1500
    diffs = verify(load([IOT], CONF), lakehouse, spark, run_first=False)
    assert all(d.equal for d in diffs), {d.table: d.samples for d in diffs}
    gold = next(d for d in diffs if d.table == "gold_device_5min")
    assert gold.stream_rows > 0


@pytest.mark.crash
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "group", [False, pytest.param(True, marks=pytest.mark.soak)], ids=["driver", "process-group"]
)
def test_sigterm_stops_after_the_running_batch(tmp_path: Path, group: bool) -> None:
    """SIGTERM to the Python driver (docker stop), or to its whole process group with Spark's
    JVM and Python workers in it (systemd's default KillMode, ``timeout``): a clean stop."""
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    driver = write_cli_driver(tmp_path / "driver.py", _run_args(lakehouse))
    log = (tmp_path / "run.log").open("wb")
    env = {**DRIVER_JVM, **os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen(
        [sys.executable, str(driver)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 400
        while spark_commits(lakehouse.checkpoint_path("silver_readings")) < 1:
            assert proc.poll() is None and time.monotonic() < deadline, "no progress"
            time.sleep(0.2)
        if group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=180) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    stop = read_events(lakehouse.event_log_path, event_types=["run_stop"])[-1]
    assert stop["details"]["reason"] == "SIGTERM"
    # silver writes in foreachBatch (drop rules): a batch cut there ends quietly (foreach_batch.py)
    printed = (tmp_path / "run.log").read_text(errors="replace")
    assert "StackOverflowError" not in printed, printed[-3000:]
    assert "Traceback" not in printed, printed[-3000:]  # the JVM outlived the signal
    # The batch running at the signal commits; one a flow planned right after it (its batches
    # outlasting the trigger) may be stopped before it writes, to be replayed by the next start.
    for flow in ("bronze_readings", "silver_readings", "gold_device_5min"):
        checkpoint = lakehouse.checkpoint_path(flow)
        planned = len([p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()])
        assert planned - 1 <= spark_commits(checkpoint) <= planned, f"{flow}: batches cut off"
