"""Late data made visible on the IoT example: rows dropped by a watermark counted per flow and
batch, and with ``late_rows="keep"`` the same rows kept in ``silver_readings_late``."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from lakefeed import entry
from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.observe.console import late_cell
from lakefeed.observe.figures import Monitor
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.advise import advise_watermark, lateness, recommend_delay, state_estimate
from lakefeed.runtime.event_log import EventLog, read_events
from lakefeed.runtime.late import late_mask
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from lakefeed.runtime.verify import dropped_late_rows, verify
from tests.observe.progress import progress
from tests.pipeline.support import IOT, IOT_CONF, load, table, write

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


@pytest.mark.spark
def test_verify_leaves_the_kept_late_rows_out(spark, runs: dict[str, Lakehouse]) -> None:
    """silver's batch recompute equals the stream's table only without the rows the stream
    kept as late (they never reached its dedup); no pyspark method is patched for it."""
    pipeline = load([IOT], {**LATE_CONF, "iot.lateRows": "keep"})
    diffs = {d.table: d for d in verify(pipeline, runs["keep"], spark, run_first=False)}
    silver = diffs["silver_readings"]
    assert silver.equal, silver.samples
    assert silver.stream_rows == table(runs["keep"], "silver_readings").num_rows


# silver's input is bronze, whose event time is inside the JSON payload.
EVENT_TIME = "from_json(value, 'event_time timestamp').event_time"


@pytest.mark.spark
def test_advice_lands_within_the_generators_lateness(spark, runs: dict[str, Lakehouse]) -> None:
    pipeline = load([IOT], LATE_CONF)
    advice = {
        share: advise_watermark(
            spark, pipeline, runs["drop"], "silver_readings", share, event_time=EVENT_TIME
        )
        for share in (80.0, 99.9)
    }
    # 90% of rows lag at most outOfOrderSeconds (5 s); the late 10% up to maxLateSeconds (300 s).
    assert advice[80.0].delay_seconds <= 6
    assert 5 < advice[99.9].delay_seconds <= 300
    assert advice[99.9].inputs == ("bronze_readings",) and advice[99.9].current_delay
    assert advice[99.9].rows > 500  # every parsable bronze row
    assert 0.9 < advice[99.9].on_time_with_current < 1.0  # the 2 minutes lose some
    out = CliRunner().invoke(
        cli,
        ["advise", "watermark", "silver_readings", str(IOT), "--json"]
        + ["--lakehouse", str(runs["drop"].root), "--event-time", EVENT_TIME]
        + ["--key", "device_id", "--window", "5 minutes", "--completeness", "99.9"]
        + [arg for key, value in LATE_CONF.items() for arg in ("--conf", f"{key}={value}")],
    )
    assert out.exit_code == 0, out.output
    found = json.loads(out.output)
    assert found["delay_seconds"] == advice[99.9].delay_seconds
    # 8 devices (and the malformed rows' empty one), each with 2 five-minute windows open.
    assert found["state_basis"].endswith("keys x 2 windows open") and found["state_rows"] >= 16


def test_lateness_counts_from_the_commits_before() -> None:
    commits = [np.array([10.0, 12.0]), np.array([11.0, 2.0, np.nan]), np.array([20.0])]
    assert lateness(commits).tolist() == [0.0, 0.0, 1.0, 10.0, 0.0]
    late = np.array([0.0] * 98 + [3.5, 250.0])
    assert recommend_delay(late, 98.0) == 0
    assert recommend_delay(late, 99.0) == 4
    assert recommend_delay(late, 99.9) == 251
    assert state_estimate(2.0, 120, None, None) == (240, "2 rows/s x 120 s")
    assert state_estimate(2.0, 120, 8, 300.0)[0] == 8 * 2


def test_unknown_late_rows_value_is_refused(tmp_path: Path) -> None:
    flow = "import lakefeed as lf\n@lf.table(late_rows='maybe')\ndef t():\n    pass\n"
    with pytest.raises(PipelineError, match=r"'t': late_rows must be one of \('drop', 'keep'\)"):
        load([write(tmp_path / "p", {"p.py": flow})])


@pytest.mark.spark
def test_keep_without_a_stateful_watermark_is_refused(spark, tmp_path: Path) -> None:
    flow = (
        "import lakefeed as lf\n"
        "@lf.table(late_rows='keep')\n"
        "def t():\n"
        "    return lf.source('rate').withWatermark('timestamp', '1 minute')\n"
    )
    result = entry.validate(
        write(tmp_path / "p", {"p.py": flow}), lakehouse=tmp_path / "lh", spark=spark
    )
    assert not result.ok
    assert any(
        "late_rows='keep' needs a withWatermark before an aggregation" in p for p in result.problems
    )


def test_late_mask_is_sparks_predicate() -> None:
    times = pa.array([999_000, 1_000_000, 1_001_000, None], pa.timestamp("us", tz="UTC"))
    assert late_mask(times, 1_000).to_pylist() == [True, True, False, False]


def test_verify_reads_the_rows_a_flow_dropped_from_its_progress(lakehouse: Lakehouse) -> None:
    """What verify's note says when the batch has rows the stream dropped as late."""
    at = datetime.now(UTC)
    with EventLog(lakehouse.event_log_path, "fraud", flush_interval=60) as log:
        for flow, batch, dropped in (("alerts", 0, 3), ("alerts", 1, 2), ("other", 0, 7)):
            figures = progress(batch, at, state_rows=1, dropped=dropped)
            log.emit("flow_progress", "batch", flow=flow, details=figures)
    assert dropped_late_rows(lakehouse, "alerts") == 5
    assert dropped_late_rows(lakehouse, "transactions") == 0
