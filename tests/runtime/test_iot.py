"""The IoT example end to end on real Delta tables: run, event log, verify, guard, refresh."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lakefeed.core.errors import DataLossRiskError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from lakefeed.runtime.verify import verify
from tests.pipeline.support import IOT, IOT_CONF, load, table

# A quarantined row names every rule it failed, warn rules included.
RULES = {"valid_json", "has_device", "temp_in_range", "battery_ok"}


@pytest.fixture(scope="module")
def iot(spark, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:
    lakehouse = Lakehouse.at(tmp_path_factory.mktemp("iot") / "lakehouse")
    result = PipelineRunner(
        load([IOT], IOT_CONF), lakehouse, spark, RunOptions(mode="available-now")
    ).run()
    assert result.ok and result.reason == "completed"
    return lakehouse


def test_tables_hold_every_row_once(iot: Lakehouse) -> None:
    bronze = table(iot, "bronze_readings")
    silver = table(iot, "silver_readings")
    quarantine = table(iot, "silver_readings_quarantine")
    assert bronze.num_rows == 1500
    assert pc.count_distinct(bronze["offset"]).as_py() == 1500
    assert {"ingest_time", "date", "value", "source"} <= set(bronze.column_names)
    # Every valid event once; duplicates re-sent by devices are gone.
    assert pc.count_distinct(silver["event_id"]).as_py() == silver.num_rows
    assert quarantine.num_rows > 0
    assert silver.num_rows + quarantine.num_rows < 1500
    for failed in quarantine["_failed_rules"].to_pylist():
        assert set(failed) <= RULES and set(failed) & (RULES - {"battery_ok"})
    assert pc.min(silver["temperature"]).as_py() >= -60
    assert pc.max(silver["temperature"]).as_py() <= 150
    devices = set(pc.unique(silver["device_id"]).to_pylist())
    assert devices and not devices & {None, ""}


def test_gold_equals_batch_recompute(spark, iot: Lakehouse) -> None:
    gold = table(iot, "gold_device_5min")
    assert gold.num_rows > 0
    diffs = {d.table: d for d in verify(load([IOT], IOT_CONF), iot, spark, run_first=False)}
    assert all(d.equal for d in diffs.values()), {n: d.samples for n, d in diffs.items()}
    assert diffs["gold_device_5min"].stream_rows == gold.num_rows
    assert diffs["gold_device_5min"].pending > 0  # the last window is still open
    assert diffs["silver_readings"].stream_rows == table(iot, "silver_readings").num_rows


def test_event_log_records_graph_progress_and_expectations(iot: Lakehouse) -> None:
    events = read_events(iot.event_log_path)
    start = next(e for e in events if e["event_type"] == "run_start")
    graph = start["details"]["graph"]
    assert {n["name"] for n in graph["nodes"]} == {
        "bronze_readings",
        "silver_readings",
        "gold_device_5min",
    }
    assert sorted(graph["edges"]) == [
        ["bronze_readings", "silver_readings"],
        ["silver_readings", "gold_device_5min"],
    ]
    progress = [e for e in events if e["event_type"] == "flow_progress"]
    assert {e["flow"] for e in progress} == {
        "bronze_readings",
        "silver_readings",
        "gold_device_5min",
    }
    assert all("numInputRows" in e["details"] for e in progress)
    # Every committed batch has its progress, the last one of each flow included (an
    # available-now query ends before Spark's listener bus delivers it).
    for flow in ("bronze_readings", "silver_readings", "gold_device_5min"):
        commits = (iot.checkpoint_path(flow) / "commits").iterdir()
        committed = {int(p.name) for p in commits if p.name.isdigit()}
        recorded = [e["details"]["batchId"] for e in progress if e["flow"] == flow]
        assert sorted(recorded) == sorted(committed), flow
    checks = [e["details"] for e in events if e["event_type"] == "expectations"]
    assert checks and all(c["table"] == "silver_readings" for c in checks)
    total = sum(c["quarantined"] for c in checks)
    assert total == table(iot, "silver_readings_quarantine").num_rows
    rules = checks[0]["rules"]
    assert rules["battery_ok"]["action"] == "warn" and rules["valid_json"]["action"] == "drop"
    assert sum(c["rules"]["valid_json"]["failed"] for c in checks) > 0
    assert events[-1]["event_type"] == "run_stop"


def test_guard_refuses_missing_checkpoint_then_full_refresh_rebuilds(
    spark, iot: Lakehouse, tmp_path: Path
) -> None:
    checkpoint = iot.checkpoint_path("gold_device_5min")
    shutil.move(checkpoint, tmp_path / "moved")
    before = table(iot, "gold_device_5min").num_rows
    pipeline = load([IOT], IOT_CONF)
    with pytest.raises(PipelineError, match="gold_device_5min.*has rows but its checkpoint"):
        PipelineRunner(pipeline, iot, spark, RunOptions(mode="available-now")).run()
    assert spark.streams.active == []
    assert table(iot, "gold_device_5min").num_rows == before
    options = RunOptions(mode="available-now", full_refresh=("gold_device_5min",))
    assert PipelineRunner(pipeline, iot, spark, options).run().ok
    assert table(iot, "gold_device_5min").num_rows == before


def test_guard_refuses_changed_stateful_flow(spark, iot: Lakehouse, tmp_path: Path) -> None:
    changed = tmp_path / "iot"
    shutil.copytree(IOT, changed)
    path = changed / "pipeline.py"
    text = path.read_text().replace(
        'F.window("event_time", "5 minutes")', 'F.window("event_time", "10 minutes")'
    )
    path.write_text(text)
    with pytest.raises(PipelineError) as error:
        PipelineRunner(load([changed], IOT_CONF), iot, spark, RunOptions("available-now")).run()
    message = str(error.value)
    assert "'gold_device_5min': its stateful operators changed" in message
    assert "--full-refresh gold_device_5min" in message
    assert spark.streams.active == []


def _files(lakehouse: Lakehouse) -> dict[str, int]:
    """Every file of the tables and checkpoints with its size (the event log may change)."""
    return {
        str(p.relative_to(lakehouse.root)): p.stat().st_size
        for folder in ("tables", "checkpoints")
        for p in (lakehouse.root / folder).rglob("*")
        if p.is_file()
    }


@pytest.mark.timeout(1800)
def test_table_behind_its_checkpoint_is_refused_then_rebuilt(
    spark, iot: Lakehouse, tmp_path: Path
) -> None:
    """The newest bronze commit is lost (a restored backup): a run would re-use its version
    number and silver, already past it, would skip those rows for good."""
    damaged = Lakehouse.at(tmp_path / "lakehouse")
    shutil.copytree(iot.root, damaged.root)
    newest = max((damaged.table_path("bronze_readings") / "_delta_log").glob("*.json"))
    newest.unlink()
    before = _files(damaged)
    pipeline = load([IOT], IOT_CONF)
    with pytest.raises(DataLossRiskError) as refused:
        PipelineRunner(pipeline, damaged, spark, RunOptions(mode="available-now")).run()
    error = refused.value
    assert error.code == "TABLE_BEHIND" and error.permanent
    assert re.search(
        r"table 'bronze_readings' is at version \d+ and holds (no batch|batches up to \d+) of "
        r"flow 'bronze_readings', whose checkpoint committed batch \d+: the table's log went back",
        str(error),
    )
    assert "flow 'silver_readings' has read table 'bronze_readings' up to version" in str(error)
    everything = "bronze_readings,silver_readings,gold_device_5min"
    assert f"--full-refresh {everything}" in str(error.fix)
    assert spark.streams.active == []
    assert _files(damaged) == before  # nothing written, nothing created
    # verify reports both flows, not a comparison of damaged tables
    diffs = {d.table: d for d in verify(pipeline, damaged, spark)}
    assert "log went back" in diffs["bronze_readings"].inconsistent
    assert "has read table 'bronze_readings'" in diffs["silver_readings"].inconsistent
    assert not diffs["bronze_readings"].equal and diffs["gold_device_5min"].inconsistent == ""
    # resetting bronze alone leaves silver's offsets past the rebuilt table: still refused
    with pytest.raises(DataLossRiskError, match="--full-refresh " + everything) as alone:
        PipelineRunner(
            pipeline, damaged, spark, RunOptions("available-now", full_refresh=("bronze_readings",))
        ).run()
    assert "(gold_device_5min read past" in str(alone.value.fix) and _files(damaged) == before
    # the advised fix rebuilds every row
    fixed = RunOptions("available-now", full_refresh=(everything,))
    assert PipelineRunner(pipeline, damaged, spark, fixed).run().ok
    for name in ("bronze_readings", "silver_readings", "silver_readings_quarantine"):
        assert table(damaged, name).num_rows == table(iot, name).num_rows, name
