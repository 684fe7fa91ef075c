"""``lakefeed plan``: real code changes against a lakehouse one run has filled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import lakefeed as lf
from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.results import FlowVerdict, UpgradePlan
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import load, write

pytestmark = pytest.mark.spark

HEAD = "import lakefeed as lf\nfrom pyspark.sql import functions as F\n\n"
BRONZE = """
@lf.table
def bronze():
    return lf.source("iot", totalRows=400, rowsPerSecond=4, devices=4, lateRate=0,
                     startTime="2026-01-01T00:00:00Z")
"""
SILVER = """
@lf.table
def silver():
    return lf.read_stream("bronze").select("device_id", F.col("ingest_time").alias("event_time"))
"""
GOLD = """
@lf.table
def gold():
    return (
        lf.read_stream("silver")
        .withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "1 minute"){keys})
        .agg(F.count("*").alias("readings"))
    )
"""
COUNTS = """
@lf.table
def counts():
    return lf.read_stream("bronze"){watermark}.groupBy(F.window("ingest_time", "1 minute")).count()
"""


def _files(silver: str = SILVER, keys: str = "", watermark: str = "") -> dict[str, str]:
    return {
        "bronze.py": HEAD + BRONZE,
        "silver.py": HEAD + silver,
        "gold.py": HEAD + GOLD.format(keys=keys),
        "counts.py": HEAD + COUNTS.format(watermark=watermark),
    }


@pytest.fixture(scope="module")
def filled(spark, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:  # noqa: ANN001
    root = tmp_path_factory.mktemp("plan")
    folder = write(root / "v1", _files())
    lakehouse = Lakehouse.at(root / "lh")
    options = RunOptions(mode="available-now")
    assert PipelineRunner(load([folder]), lakehouse, spark, options).run().ok
    return lakehouse


def _plan(spark, lakehouse: Lakehouse, tmp_path: Path, **change: str) -> UpgradePlan:  # noqa: ANN001
    folder = write(tmp_path / "v2", _files(**change))
    return lf.plan(folder, lakehouse=lakehouse, spark=spark)


def test_unchanged_code_keeps_every_flow(spark, filled: Lakehouse, tmp_path: Path) -> None:
    plan = _plan(spark, filled, tmp_path)
    assert plan.ok, plan
    assert {f.flow: f.verdict for f in plan.flows} == dict.fromkeys(
        ["bronze", "silver", "gold", "counts"], FlowVerdict.KEEP
    )
    assert plan.flow("gold").reprocessed.startswith("nothing: resumes after batch")


def test_a_new_column_is_a_compatible_change(spark, filled: Lakehouse, tmp_path: Path) -> None:
    wider = SILVER.replace('alias("event_time"))', 'alias("event_time"), "offset")')
    plan = _plan(spark, filled, tmp_path, silver=wider)
    assert plan.ok
    change = plan.flow("silver")
    assert change.verdict is FlowVerdict.COMPATIBLE
    assert "adds column 'offset'" in change.reasons[0]
    assert plan.flow("gold").verdict is FlowVerdict.KEEP


def test_a_changed_aggregation_key_needs_a_full_refresh(
    spark, filled: Lakehouse, tmp_path: Path
) -> None:
    plan = _plan(spark, filled, tmp_path, keys=', "device_id"')
    assert not plan.ok
    change = plan.flow("gold")
    assert change.verdict is FlowVerdict.REFRESH
    assert "stateful operators changed" in change.reasons[0]
    assert change.reprocessed.endswith("rebuilt from the start of its sources")
    assert plan.refresh() == ["gold"]


def test_a_new_watermark_changes_the_output_mode(spark, filled: Lakehouse, tmp_path: Path) -> None:
    watermark = '.withWatermark("ingest_time", "1 minute")'
    plan = _plan(spark, filled, tmp_path, watermark=watermark)
    change = plan.flow("counts")
    assert change.verdict is FlowVerdict.REFRESH, change
    assert any("output mode changes from complete to" in r for r in change.reasons)


def test_a_renamed_flow_orphans_its_table_and_refreshes_its_readers(
    spark, filled: Lakehouse, tmp_path: Path
) -> None:
    renamed = SILVER.replace("def silver", "def silver_readings")
    files = _files(silver=renamed)
    files["gold.py"] = files["gold.py"].replace(
        'read_stream("silver")', 'read_stream("silver_readings")'
    )
    folder = write(tmp_path / "v2", files)
    plan = lf.plan(folder, lakehouse=filled, spark=spark)
    verdicts = {f.flow: f.verdict for f in plan.flows}
    assert verdicts["silver_readings"] is FlowVerdict.NEW
    assert verdicts["silver"] is FlowVerdict.ORPHANED
    assert verdicts["gold"] is FlowVerdict.REFRESH
    assert "no longer reads table 'silver'" in " ".join(plan.flow("gold").reasons)


def test_cli_plan_exits_2_when_run_would_refuse(spark, filled: Lakehouse, tmp_path: Path) -> None:
    del spark  # the command reuses the running session
    folder = write(tmp_path / "v2", _files(keys=', "device_id"'))
    args = ["plan", str(folder), "--lakehouse", str(filled.root)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2, done.output
    assert "needs a full refresh" in done.output and "--full-refresh gold" in done.output
    as_json = CliRunner().invoke(cli, [*args, "--json"])
    document = json.loads(as_json.stdout)
    assert {f["flow"]: f["verdict"] for f in document["flows"]}["gold"] == "needs a full refresh"
