"""The first run of the IoT example as the README tells it, then ``lakefeed verify`` over exactly
the input the checkpoints committed: no ``startTime`` or ``totalRows`` passed, any restarts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lakefeed.core.lakehouse import Lakehouse
from tests.pipeline.support import IOT, table
from tests.support.crash import run_cli_with_kills, spark_commits
from tests.support.verify import assert_verify_passes, conf_args

# The example's own defaults (start time: a backlog before the first run) at a rate the test
# machine processes quickly: 600 s x 3 rows/s = a backlog of about 1800 rows.
CONF = {"iot.rowsPerSecond": "3", "iot.devices": "8"}
LAKEFEED = str(Path(sys.executable).with_name("lakefeed"))


def _run_args(lakehouse: Lakehouse, conf: dict[str, str]) -> list[str]:
    return [
        "run", str(IOT), "--lakehouse", str(lakehouse.root), "--master", "local[2]",
        *conf_args(conf),
    ]  # fmt: skip


@pytest.mark.timeout(1800)
def test_first_available_now_run_has_rows_and_verify_passes(spark, tmp_path: Path) -> None:
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    done = subprocess.run(
        [LAKEFEED, *_run_args(lakehouse, CONF), "--mode", "available-now"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed" in done.stderr + done.stdout
    bronze = table(lakehouse, "bronze_readings")
    assert bronze.num_rows >= 1700  # the default backlog
    assert pc.count_distinct(bronze["offset"]).as_py() == bronze.num_rows
    assert table(lakehouse, "gold_device_5min").num_rows > 0  # 10 minutes close windows
    # verify catches up first (more rows have arrived since), then compares: equal everywhere.
    assert_verify_passes(IOT, lakehouse, CONF, run_first=True)


@pytest.mark.crash
@pytest.mark.soak  # kill -9 then verify: CI's proof is tests/runtime/test_crash
@pytest.mark.timeout(1800)
def test_kill9_mid_stream_restart_then_verify_passes(spark, tmp_path: Path) -> None:
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    conf = {**CONF, "iot.maxRowsPerTrigger": "400"}
    silver = lakehouse.checkpoint_path("silver_readings")
    report = run_cli_with_kills(
        tmp_path,
        _run_args(lakehouse, conf),
        kill_when=lambda _: spark_commits(silver) >= 1,  # bronze is mid-backlog by then
        min_delay=240,
        max_delay=300,
        final_timeout=900,
    )
    assert report.kills == 1
    bronze = table(lakehouse, "bronze_readings")
    assert pc.count_distinct(bronze["offset"]).as_py() == bronze.num_rows >= 1700
    assert_verify_passes(IOT, lakehouse, conf)
