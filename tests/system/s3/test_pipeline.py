"""The IoT pipeline with its whole lakehouse on S3 (moto): ``lakefeed run`` killed with -9
mid-stream, then ``lakefeed verify`` (which catches up available-now first, then compares each
table with a batch recompute and exits 1 on any difference). One run serves every assertion."""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from lakefeed.core import storage
from lakefeed.core.errors import ConfigError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.observe.server import start_server
from lakefeed.runtime.event_log import read_events
from tests.pipeline.support import IOT, IOT_CONF
from tests.support.crash import CrashReport, run_driver_with_kills
from tests.support.net import free_port
from tests.support.s3 import MotoServer

CONF = {**IOT_CONF, "iot.maxRowsPerTrigger": "500"}
ROWS = int(IOT_CONF["iot.totalRows"])

DRIVER = """
import os
from lakefeed.cli.main import cli

common = [{iot!r}, "--lakehouse", {lakehouse!r}, "--master", "local[2]",
          "--spark-conf", "spark.ui.enabled=false"]
for key, value in {conf!r}.items():
    common += ["--conf", f"{{key}}={{value}}"]
if os.environ.get("LAKEFEED_CRASH_RUN") == "final":
    cli(["verify", *common], standalone_mode=True)
else:
    cli(["run", *common, "--mode", "continuous", "--trigger-interval", "1 second",
         "--max-restarts", "30"], standalone_mode=True)
"""


@dataclass
class Outcome:
    lakehouse: Lakehouse
    report: CrashReport
    env: dict[str, str]


@pytest.fixture(scope="module")
def outcome(moto: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    workdir = tmp_path_factory.mktemp("s3-pipeline")
    lakehouse = Lakehouse.at(f"s3://{moto.bucket()}/lh")
    driver = workdir / "driver.py"
    driver.write_text(DRIVER.format(iot=str(IOT), lakehouse=str(lakehouse.root), conf=CONF))
    bronze_commits = lakehouse.checkpoint_path("bronze_readings") / "commits"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in moto.env().items():  # the kill condition reads the checkpoint on S3
            patch.setenv(key, value)
        report = run_driver_with_kills(
            driver,
            workdir=workdir,
            kills=1,
            # mid-stream: bronze has committed a batch of its three
            kill_when=lambda _: any(n.isdigit() for n in storage.list_names(str(bronze_commits))),
            min_delay=300,
            max_delay=300,
            env=moto.env(),
            final_timeout=600,
        )
    return Outcome(lakehouse, report, moto.env())


@pytest.mark.crash
@pytest.mark.timeout(1200)
def test_kill9_on_s3_then_verify_every_row_once(outcome: Outcome, monkeypatch) -> None:
    for key, value in outcome.env.items():
        monkeypatch.setenv(key, value)
    assert outcome.report.kills == 1
    bronze = DeltaTable(str(outcome.lakehouse.table_path("bronze_readings"))).to_pyarrow_table()
    assert bronze.num_rows == ROWS
    assert pc.count_distinct(bronze["offset"]).as_py() == ROWS
    assert "gold_device_5min" in outcome.report.logs[-1]  # verify compared it (and exited 0)


@pytest.mark.crash
def test_s3_tables_read_back_by_deltalake_and_polars(outcome: Outcome, monkeypatch) -> None:
    for key, value in outcome.env.items():
        monkeypatch.setenv(key, value)
    for name in ("silver_readings", "gold_device_5min"):
        uri = str(outcome.lakehouse.table_path(name))
        expected = DeltaTable(uri).to_pyarrow_table()
        frame = pl.read_delta(uri)
        assert frame.height == expected.num_rows > 0
        assert sorted(frame.columns) == sorted(expected.column_names)


@pytest.mark.crash
def test_s3_secrets_stay_out_of_logs_and_event_log(outcome: Outcome, monkeypatch) -> None:
    for key, value in outcome.env.items():
        monkeypatch.setenv(key, value)
    secret = outcome.env["AWS_SECRET_ACCESS_KEY"]
    events = read_events(outcome.lakehouse.event_log_path)
    assert {e["event_type"] for e in events} >= {"run_start", "flow_progress", "run_stop"}
    assert secret not in str(events)
    assert all(secret not in text for text in outcome.report.logs)


@pytest.mark.crash
def test_ui_serves_the_s3_lakehouse_without_its_secret(outcome: Outcome, monkeypatch) -> None:
    for key, value in outcome.env.items():
        monkeypatch.setenv(key, value)
    server = start_server(outcome.lakehouse, port=free_port())
    try:
        pages = {
            path: urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}").read().decode()
            for path in ("/api/state", "/api/tables", "/api/tables/bronze_readings")
        }
    finally:
        server.stop()
    assert json.loads(pages["/api/tables/bronze_readings"])["rows"] == ROWS
    assert all(outcome.env["AWS_SECRET_ACCESS_KEY"] not in page for page in pages.values())


def test_local_lakehouse_stays_a_path(tmp_path: Path) -> None:
    assert isinstance(Lakehouse.at(tmp_path).root, Path)
    assert isinstance(Lakehouse.at("s3a://bucket/lh").root, storage.ObjectPath)
    with pytest.raises(ConfigError, match="went through pathlib.Path"):
        Lakehouse.at(Path("s3://bucket/lh"))  # would silently be a local folder "s3:"
