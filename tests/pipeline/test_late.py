"""Late data made visible on the IoT example: rows dropped by a watermark counted per flow and
batch, and with ``late_rows="keep"`` the same rows kept in ``silver_readings_late``."""

from __future__ import annotations

import shutil
from collections import Counter

import pyarrow as pa
import pytest

from lakefeed.lakehouse import Lakehouse
from lakefeed.observe.console import late_cell
from lakefeed.observe.event_log import read_events
from lakefeed.observe.figures import Monitor
from lakefeed.runtime.late import late_mask
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import IOT, IOT_CONF, load, table

# 600 rows over 5 minutes, 10% lagging up to 5 minutes behind, silver reading one bronze batch
# (two files) at a time: its 2-minute watermark moves between batches, so late rows meet it.
LATE_CONF = {
    **IOT_CONF,
    "iot.totalRows": "600",
    "iot.lateRate": "0.1",
    "iot.maxRowsPerTrigger": "200",
    "iot.silverMaxFilesPerTrigger": "2",
}


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Lakehouse]:
    """The same input run twice: losing late rows (the default), then keeping them; the second
    run starts from the first one's bronze (its table and checkpoint) to save a third of it."""
    lakehouses: dict[str, Lakehouse] = {}
    for late_rows in ("drop", "keep"):
        lakehouse = Lakehouse.at(tmp_path_factory.mktemp(late_rows) / "lakehouse")
        if lakehouses:
            for path in (Lakehouse.table_path, Lakehouse.checkpoint_path):
                shutil.copytree(
                    path(lakehouses["drop"], "bronze_readings"), path(lakehouse, "bronze_readings")
                )
        pipeline = load([IOT], {**LATE_CONF, "iot.lateRows": late_rows})
        options = RunOptions(mode="available-now")
        assert PipelineRunner(pipeline, lakehouse, spark, options).run().ok
        lakehouses[late_rows] = lakehouse
    return lakehouses


def dropped(lakehouse: Lakehouse) -> Counter[str]:
    """Rows each flow's stateful operators dropped, from the progress in the event log."""
    counts: Counter[str] = Counter()
    for event in read_events(lakehouse.event_log_path):
        if event["event_type"] == "flow_progress":
            operators = event["details"].get("stateOperators") or []
            counts[event["flow"]] += sum(op["numRowsDroppedByWatermark"] for op in operators)
    return counts


def monitor(lakehouse: Lakehouse) -> Monitor:
    folded = Monitor()
    folded.apply_all(read_events(lakehouse.event_log_path))
    return folded


@pytest.mark.spark
def test_dropped_rows_are_counted_per_flow(runs: dict[str, Lakehouse]) -> None:
    counts = dropped(runs["drop"])
    assert counts["silver_readings"] > 0
    flows = {f.name: f for f in monitor(runs["drop"]).flows()}
    assert flows["silver_readings"].dropped_late_total == counts["silver_readings"]
    assert late_cell(flows["silver_readings"]) == f"{counts['silver_readings']:,}"


@pytest.mark.spark
def test_kept_late_rows_are_exactly_the_dropped_ones(runs: dict[str, Lakehouse]) -> None:
    lost = dropped(runs["drop"])["silver_readings"]
    late = table(runs["keep"], "silver_readings_late")
    assert late.num_rows == lost
    assert dropped(runs["keep"])["silver_readings"] == 0  # none reached the operator
    # Splitting them off left the watermark, and so silver, as it was.
    ids = {
        name: sorted(table(runs[name], "silver_readings")["event_id"].to_pylist()) for name in runs
    }
    assert ids["keep"] == ids["drop"]
    flow = next(f for f in monitor(runs["keep"]).flows() if f.name == "silver_readings")
    assert flow.kept_late_total == lost
    assert late_cell(flow).endswith(f"(+{lost:,} kept)")


def test_late_mask_is_sparks_predicate() -> None:
    times = pa.array([999_000, 1_000_000, 1_001_000, None], pa.timestamp("us", tz="UTC"))
    assert late_mask(times, 1_000).to_pylist() == [True, True, False, False]
