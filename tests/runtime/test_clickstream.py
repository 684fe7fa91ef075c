"""The clickstream example end to end: validate, an available-now run, its sessions and state."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from lakefeed import entry
from lakefeed.cli.main import cli
from lakefeed.core.errors import CheckpointError, code_of
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from lakefeed.runtime.state import UNKNOWN_FLOW, inspect_state
from tests.pipeline.support import ROOT, load, table

CLICKSTREAM = ROOT / "examples" / "clickstream"
# 1200 clicks, 2 per second from a fixed start: 10 minutes of event time, so sessions of the
# 6 users close under the 1-minute watermark and 2-minute gap.
CONF = {
    "clickstream.totalRows": "1200",
    "clickstream.rowsPerSecond": "2",
    "clickstream.users": "6",
    "clickstream.startTime": "2026-01-01T00:00:00Z",
    "clickstream.seed": "7",
    "clickstream.lateRate": "0",  # no click later than the watermark: stream == batch
}


@pytest.fixture(scope="module")
def clicks(spark, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:
    lakehouse = Lakehouse.at(tmp_path_factory.mktemp("clickstream") / "lakehouse")
    result = PipelineRunner(
        load([CLICKSTREAM], CONF), lakehouse, spark, RunOptions(mode="available-now")
    ).run()
    assert result.ok and result.reason == "completed"
    return lakehouse


def test_validate_passes(spark, tmp_path) -> None:
    result = entry.validate(CLICKSTREAM, lakehouse=tmp_path / "lh", conf=CONF, spark=spark)
    assert result.ok, result.problems
    assert result.order == ("bronze_clicks", "silver_clicks", "gold_sessions")


def test_run_produces_sessions(clicks: Lakehouse) -> None:
    silver = table(clicks, "silver_clicks")
    assert pc.count_distinct(silver["event_id"]).as_py() == silver.num_rows  # no duplicates
    gold = table(clicks, "gold_sessions").to_pylist()
    assert gold
    for session in gold:
        assert session["session_end"] > session["session_start"]
        assert session["clicks"] >= 1 and 1 <= session["distinct_pages"] <= 5
        assert session["converted"] == (session["purchases"] > 0)
    assert sum(s["clicks"] for s in gold) < silver.num_rows  # the last sessions are still open


def test_state_of_each_flow(spark, clicks: Lakehouse) -> None:
    (session_op,) = inspect_state(spark, clicks, "gold_sessions", limit=3).operators
    assert session_op.name == "sessionWindowStateStoreSaveExec"
    assert session_op.bytes_on_disk > 0 and session_op.partitions > 0
    assert session_op.memory_used_bytes and session_op.rows_dropped_by_watermark is not None
    (store,) = session_op.stores
    assert store.keys and store.keys > 0 and len(store.sample) == min(3, store.keys)
    assert set(store.sample[0]["key"]) == {"user_id", "sessionStartTime"}
    (dedup,) = inspect_state(spark, clicks, "silver_clicks").operators
    assert dedup.name == "dedupe" and dedup.stores[0].keys
    assert set(dedup.stores[0].sample[0]["key"]) == {"event_id", "event_time"}
    assert inspect_state(spark, clicks, "bronze_clicks").operators == []


def test_unknown_flow_names_the_known_ones(spark, clicks: Lakehouse) -> None:
    with pytest.raises(CheckpointError) as caught:
        inspect_state(spark, clicks, "gold_session")
    assert code_of(caught.value) == UNKNOWN_FLOW
    assert "gold_sessions" in str(caught.value)


def test_state_cli(spark, clicks: Lakehouse) -> None:
    home = ["--lakehouse", str(clicks.root)]
    shown = CliRunner().invoke(cli, ["state", "gold_sessions", "--json", "-n", "1", *home])
    assert shown.exit_code == 0, shown.output
    (operator,) = json.loads(shown.output)["operators"]
    assert operator["stores"][0]["keys"] > 0 and len(operator["stores"][0]["sample"]) == 1
    table_view = CliRunner().invoke(cli, ["state", "gold_sessions", *home])
    assert "sessionWindowStateStoreSaveExec" in table_view.output
    empty = CliRunner().invoke(cli, ["state", "bronze_clicks", *home])
    assert empty.exit_code == 0 and "keeps no state" in empty.output
    unknown = CliRunner().invoke(cli, ["state", "nope", *home])
    assert unknown.exit_code != 0 and "gold_sessions" in unknown.output
