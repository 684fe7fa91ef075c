"""The fraud example: transformWithState rules on planted patterns over two available-now runs
(state kept across the restart), late transactions kept and counted, ``lakefeed verify``,
``lakefeed state`` and the UI's state view."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner

from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.observe.server import start_server
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import ROOT, load, table, write
from tests.support.verify import assert_verify_passes

FRAUD = ROOT / "examples" / "fraud"
START = datetime(2026, 1, 1, tzinfo=UTC)
PLACES = {"Lisbon": (38.72, -9.14), "Berlin": (52.52, 13.40), "Singapore": (1.35, 103.82)}


def txn(card: str, minute: int, city: str = "Berlin") -> dict:
    lat, lon = PLACES[city]
    at = (START + timedelta(minutes=minute)).isoformat()
    return {"txn_id": f"{card}@{minute}", "card_id": card, "amount": 10.0, "txn_time": at,
            "city": city, "lat": lat, "lon": lon}  # fmt: skip


# Run 1: event time 0..60 min, so the watermark (5 minutes) ends at 55 min.
FIRST = [
    *(txn(f"clean-{i}", m, "Lisbon") for i in range(3) for m in (0, 20, 40, 60)),
    *(txn("slow", m) for m in (0, 15, 30, 45)),  # 4 transactions, never 4 within 10 minutes
    *(txn("fast", m) for m in (10, 11, 12, 13, 14)),  # velocity: one alert, at the 4th
    txn("travel", 20, "Lisbon"),
    txn("travel", 50, "Singapore"),  # 11,900 km in 30 minutes
    txn("span", 56),
    txn("span", 57),  # its window is still open when run 1 ends
]
# Run 2, after a restart: two more for "span" (4 within 10 minutes across the runs), and a
# burst older than the watermark: kept in alerts_late, never seen by the operator, so no alert.
SECOND = [
    txn("span", 59),
    txn("span", 61),
    *(txn("late", m) for m in (1, 2, 3, 4)),
    txn("clean-0", 70, "Lisbon"),
]
TWS = "transformWithStateInPySparkExec"  # Spark's operator name for Python transformWithState
CONF = {"fraud.watermark": "5 minutes", "fraud.idleAfter": "0 seconds"}


def lines(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture(scope="module")
def fraud(spark, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:
    home = tmp_path_factory.mktemp("fraud")
    lakehouse = Lakehouse.at(home / "lakehouse")
    conf = {**CONF, "fraud.landing": str(home / "landing")}
    for name, rows in (("1.json", FIRST), ("2.json", SECOND)):
        write(home / "landing", {name: lines(rows)})
        result = PipelineRunner(
            load([FRAUD], conf), lakehouse, spark, RunOptions(mode="available-now")
        ).run()
        assert result.ok and result.reason == "completed"
    return lakehouse


@pytest.mark.spark
def test_alerts_exactly_for_the_planted_patterns(fraud: Lakehouse) -> None:
    alerts = sorted(
        (a["card_id"], a["rule"], a["txn_id"], a["txn_count"])
        for a in table(fraud, "alerts").to_pylist()
    )
    assert alerts == [
        ("fast", "velocity", "fast@13", 4),
        ("span", "velocity", "span@61", 4),  # two transactions in each run: state was kept
        ("travel", "impossible_travel", "travel@50", 2),
    ]
    (travel,) = [a for a in table(fraud, "alerts").to_pylist() if a["card_id"] == "travel"]
    assert travel["detail"].startswith("Lisbon → Singapore")


@pytest.mark.spark
def test_late_transactions_are_kept_and_counted(fraud: Lakehouse) -> None:
    late = sorted(t["txn_id"] for t in table(fraud, "alerts_late").to_pylist())
    assert late == [f"late@{m}" for m in (1, 2, 3, 4)]  # older than the watermark of run 1
    progress = read_events(fraud.event_log_path, event_types=["flow_progress"], flow="alerts")
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for event in progress
        for op in event["details"].get("stateOperators", [])
    )
    assert dropped == 0  # split off before the operator, which so never saw them
    status = CliRunner().invoke(cli, ["status", "--lakehouse", str(fraud.root), "--json"])
    pipelines = json.loads(status.output)["pipelines"]
    (flow,) = [f for p in pipelines for f in p["flows"] if f["name"] == "alerts"]
    assert (flow["dropped_late_total"], flow["kept_late_total"]) == (0, 4)


@pytest.mark.spark
def test_verify_compares_alerts_and_leaves_out_the_wall_clock_table(fraud: Lakehouse) -> None:
    """Alerts equal a batch run without the kept late rows; card_activity (processing-time
    timers) is not compared, and says why."""
    conf = {**CONF, "fraud.landing": str(fraud.root.parent / "landing")}
    output = assert_verify_passes(FRAUD, fraud, conf)
    alerts = next(line for line in output.splitlines() if line.startswith("│ alerts "))
    assert "equal" in alerts and "│ 3 " in alerts
    assert "card_activity: not compared: a processing-time transformWithState" in output


@pytest.mark.spark
def test_processing_time_timer_emits_idle_cards(fraud: Lakehouse) -> None:
    """idleAfter 0 s: each batch's cards go idle at its end; no watermark, so all rows count."""
    activity = table(fraud, "card_activity").to_pylist()
    totals = Counter[str]()
    for row in activity:
        totals[row["card_id"]] += row["txns"]
    assert totals == Counter(t["card_id"] for t in FIRST + SECOND)
    assert {r["status"] for r in activity} == {"idle"}


@pytest.mark.spark
def test_state_cli_lists_the_transform_with_state_variables(spark, fraud: Lakehouse) -> None:
    home = ["--lakehouse", str(fraud.root)]
    shown = CliRunner().invoke(cli, ["state", "alerts", "--json", "-n", "2", *home])
    assert shown.exit_code == 0, shown.output
    (rules,) = json.loads(shown.output)["operators"]
    assert rules["name"] == TWS and rules["partitions"] > 0
    stores = {s["name"]: s for s in rules["stores"]}
    assert set(stores) == {"burst_alerted", "last_seen", "recent", "timers"}
    assert all(s["error"] is None for s in stores.values()), stores
    # the travel horizon (22 h) keeps every card's last place: all but "late" (kept in alerts_late)
    assert stores["last_seen"]["keys"] == len({t["card_id"] for t in FIRST + SECOND} - {"late"})
    assert set(stores["recent"]["sample"][0]) == {"key", "list_element", "partition_id"}


@pytest.mark.spark
def test_ui_state_endpoint(fraud: Lakehouse) -> None:
    server = start_server(fraud, port=0)
    try:
        status, body = fetch(server.url + "api/state/card_activity?limit=1")
        assert status == 200, body
        (operator,) = body["operators"]
        assert operator["name"] == TWS and operator["bytes_on_disk"] > 0
        assert {"variable": "profile", "ttl_enabled": True} in operator["ttl"]
        assert {s["name"] for s in operator["stores"]} == {"profile", "timers"}
        status, body = fetch(server.url + "api/state/nope")
        assert status == 404 and "alerts" in body["error"]
        status, body = fetch(server.url + "api/state/transactions")
        assert status == 200 and body["operators"] == []
    finally:
        server.stop()


def fetch(url: str) -> tuple[int, dict]:
    """GET with a long timeout: the state read runs Spark jobs."""
    try:
        with urllib.request.urlopen(url, timeout=180) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
