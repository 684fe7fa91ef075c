"""The enrichment example: one continuous run whose Delta and PostgreSQL dimensions change while
it runs (later micro-batches join the new values, earlier rows keep theirs), ``lakefeed
verify``'s verdicts, the flows in ``lakefeed status`` and the UI, the password kept out of both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psycopg
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.observe.server import start_server
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.results import VerifyResult
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from lakefeed.runtime.verify import STATIC_JOIN, verify
from tests.pipeline.support import ROOT, load, table

ENRICHMENT = ROOT / "examples" / "enrichment"
SECRET = "s3cret-pw"  # in the URL on purpose: trust auth ignores it, redaction must hide it
MOVED = "dev-00001"  # Berlin, limit 30 until the change: Porto, limit -100 (always over)


def batches(root: Path) -> list[list[dict]]:
    """The rows each micro-batch appended, in batch order (one Delta commit per batch)."""
    found = []
    for name in sorted(os.listdir(root / "_delta_log")):
        if not name.endswith(".json"):
            continue
        actions = [
            json.loads(line) for line in (root / "_delta_log" / name).read_text().splitlines()
        ]
        if not any("txn" in a for a in actions):
            continue  # table creation, compaction
        added = [a["add"]["path"] for a in actions if "add" in a and a["add"]["dataChange"]]
        found.append([r for p in added for r in pq.read_table(root / p).to_pylist()])
    return [rows for rows in found if rows]


def seen(rows: list[dict]) -> tuple[set, set]:
    moved = [r for r in rows if r["device_id"] == MOVED]
    return {r["site"] for r in moved}, {r["max_temp"] for r in moved}


def change_dimensions(
    home: Path, url: str, lakehouse: Lakehouse, runner: PipelineRunner, errors: list
) -> None:
    """As the README does, from other processes: once enriched rows are written, move a device
    (Delta) and lower its limit (SQL UPDATE); stop the run once a later batch joined both."""
    enriched = lakehouse.table_path("readings_enriched")
    deadline = time.monotonic() + 150
    try:
        while time.monotonic() < deadline and not (enriched.exists() and batches(enriched)):
            time.sleep(0.5)
        move = [sys.executable, str(ENRICHMENT / "pipeline.py"), "move", MOVED, "Porto"]
        subprocess.run(move, cwd=home, check=True, capture_output=True, timeout=60)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE device_limits SET max_temp = -100 WHERE device_id = %s", [MOVED])
        while time.monotonic() < deadline:
            if any(seen(rows) == ({"Porto"}, {-100.0}) for rows in batches(enriched)):
                break
            time.sleep(0.5)
    except Exception as error:  # noqa: BLE001 - reported by the fixture
        errors.append(error)
    finally:
        runner.request_stop("dimensions changed and joined")


@pytest.fixture(scope="module")
def enrichment(spark, postgres, tmp_path_factory: pytest.TempPathFactory) -> tuple[Lakehouse, dict]:
    home = tmp_path_factory.mktemp("enrichment")
    url = postgres.create_database()
    seed = [sys.executable, str(ENRICHMENT / "pipeline.py"), "seed", url]
    subprocess.run(seed, cwd=home, check=True, capture_output=True, timeout=60)
    conf = {
        "enrichment.devicesTable": str(home / "reference" / "devices"),
        "enrichment.postgresUrl": url.replace("lakefeed@", f"lakefeed:{SECRET}@"),
        "enrichment.devices": "3",
        "enrichment.rowsPerSecond": "20",
        "enrichment.backlogSeconds": "5",
    }
    lakehouse = Lakehouse.at(home / "lakehouse")
    # a short stop_timeout: a stop between a batch's Delta commit and its checkpoint commit is
    # safe (the next run skips the batch by its txn), and waiting for an idle moment is slow
    options = RunOptions(
        mode="continuous", trigger_interval="1 second", duration=170, stop_timeout=10
    )
    runner = PipelineRunner(load([ENRICHMENT], conf), lakehouse, spark, options)
    errors: list[Exception] = []
    changer = threading.Thread(
        target=change_dimensions, args=(home, url, lakehouse, runner, errors)
    )
    changer.start()
    result = runner.run()
    changer.join()
    assert result.ok and not errors, (result, errors)
    return lakehouse, conf


@pytest.mark.spark
@pytest.mark.postgres
def test_every_reading_is_enriched_from_both_dimensions(enrichment) -> None:
    lakehouse, _ = enrichment
    rows = table(lakehouse, "readings_enriched").to_pylist()
    ids = [r["event_id"] for r in rows]
    # left joins keep each reading once (the newest readings may still wait when the run stops)
    assert len(ids) == len(set(ids)) and set(ids) <= set(
        table(lakehouse, "readings")["event_id"].to_pylist()
    )
    assert {r["device_id"] for r in rows} == {"dev-00000", MOVED, "dev-00002"}
    others = [r for r in rows if r["device_id"] != MOVED]
    assert {(r["device_id"], r["site"], r["owner"]) for r in others} == {
        ("dev-00000", "Lisbon", "team-0"),
        ("dev-00002", "Oslo", "team-0"),
    }
    assert {r["max_temp"] for r in others} == {30.0}
    assert all(r["over_limit"] == (r["temperature"] > r["max_temp"]) for r in rows)


@pytest.mark.spark
@pytest.mark.postgres
def test_later_batches_join_the_changed_dimensions_earlier_rows_keep_theirs(enrichment) -> None:
    lakehouse, _ = enrichment
    per_batch = [seen(rows) for rows in batches(lakehouse.table_path("readings_enriched"))]
    sites = [s for s, _ in per_batch if s]
    limits = [m for _, m in per_batch if m]
    assert all(len(s) == 1 for s in sites + limits), per_batch  # one version per batch
    assert sites[0] == {"Berlin"} and sites[-1] == {"Porto"}, per_batch
    assert limits[0] == {30.0} and limits[-1] == {-100.0}, per_batch
    # once a batch saw the change, every later one did: no batch went back to a pinned version
    assert sites[sites.index({"Porto"}) :] == [{"Porto"}] * (len(sites) - sites.index({"Porto"}))
    assert limits[limits.index({-100.0}) :] == [{-100.0}] * (len(limits) - limits.index({-100.0}))


@pytest.mark.spark
@pytest.mark.postgres
def test_verify_compares_readings_and_counts_the_enriched_rows(spark, enrichment) -> None:
    lakehouse, conf = enrichment
    # run_first: the stop may fall between a batch's Delta commit and its checkpoint commit;
    # the catch-up run completes it, as `lakefeed verify` does by default
    tables = verify(load([ENRICHMENT], conf), lakehouse, spark, run_first=True)
    diffs = {d.table: d for d in tables}
    assert VerifyResult("enrichment", tuple(tables)).ok  # what `lakefeed verify` exits 0 on
    assert diffs["readings"].equal and diffs["readings"].stream_rows > 0
    enriched = diffs["readings_enriched"]
    assert enriched.excluded and enriched.note == STATIC_JOIN
    rows = table(lakehouse, "readings_enriched").num_rows
    assert (enriched.stream_rows, enriched.batch_rows) == (rows, rows)


@pytest.mark.spark
@pytest.mark.postgres
def test_status_and_ui_show_the_flows_without_the_password(enrichment) -> None:
    lakehouse, _ = enrichment
    status = CliRunner().invoke(cli, ["status", "--lakehouse", str(lakehouse.root), "--json"])
    assert status.exit_code == 0, status.output
    (pipeline,) = json.loads(status.output)["pipelines"]
    flows = {f["name"]: f for f in pipeline["flows"]}
    assert set(flows) == {"readings", "readings_enriched"}
    assert all(f["batches"] > 1 for f in flows.values()), flows
    server = start_server(lakehouse, port=0)
    try:
        with urllib.request.urlopen(server.url + "api/state", timeout=30) as response:
            ui = response.read().decode()
        with urllib.request.urlopen(server.url + "api/events?limit=1000", timeout=30) as response:
            events = response.read().decode()
    finally:
        server.stop()
    (shown,) = json.loads(ui)["pipelines"]
    assert {f["name"] for f in shown["flows"]} == {"readings", "readings_enriched"}
    logged = json.dumps(read_events(lakehouse.event_log_path), default=str)
    for text in (status.output, ui, events, logged):
        assert SECRET not in text
