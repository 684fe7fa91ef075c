"""The UI server's HTTP API and /metrics, over real HTTP against a real event log."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from prometheus_client.parser import text_string_to_metric_families

from lakefeed.core.errors import ConfigError, code_of
from lakefeed.observe.server import start_server
from lakefeed.runtime.event_log import EventLog
from tests.observe.progress import GRAPH, progress

SECRET = "s3cr3t-kafka-pass"


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.fixture
def pipeline_log(lakehouse):
    """A finished-looking run: two flows with three batches each, one failed, expectations."""
    now = datetime.now(UTC)
    with EventLog(lakehouse.event_log_path, "iot", flush_interval=60) as log:
        log.emit(
            "run_start",
            "run",
            details={"mode": "continuous", "graph": GRAPH, "kafka.sasl.password": SECRET},
        )
        for flow in ("bronze", "gold"):
            log.emit("flow_start", flow, flow=flow, details={"target": flow})
        for i in range(3):
            at = now - timedelta(seconds=3 - i)
            log.emit(
                "flow_progress",
                "batch",
                flow="bronze",
                details=progress(i, at, input_rps=100.0 * (i + 2), state_rows=10 * i, dropped=2),
            )
        log.emit(
            "expectations",
            "checked",
            flow="bronze",
            details={
                "batch_id": 2,
                "table": "bronze",
                "rules": {"valid_temp": {"action": "drop", "passed": 95, "failed": 5}},
                "quarantined": 5,
            },
        )
        log.emit(
            "flow_failed",
            "gold failed",
            flow="gold",
            level="ERROR",
            details={"error": f"ConnectionError: password={SECRET} refused", "traceback": "tb"},
        )
    quarantine = pa.table({"device_id": ["d1"] * 5, "_failed_rules": [["valid_temp"]] * 5})
    write_deltalake(str(lakehouse.table_path("bronze_quarantine")), quarantine)
    return lakehouse


@pytest.fixture
def server(pipeline_log):
    handle = start_server(pipeline_log, port=0)
    yield handle
    handle.stop()


def test_state_api_has_graph_flows_and_quality(server):
    status, _, body = get(server.url + "api/state")
    assert status == 200
    assert SECRET.encode() not in body
    (pipeline,) = json.loads(body)["pipelines"]
    assert pipeline["mode"] == "continuous"
    assert {n["name"] for n in pipeline["layout"]["nodes"]} == {"readings", "bronze", "gold"}
    flows = {f["name"]: f for f in pipeline["flows"]}
    assert flows["bronze"]["state"] == "running" and flows["bronze"]["batches"] == 3
    assert flows["bronze"]["series"]["input_rps"] == [200.0, 300.0, 400.0]
    assert flows["gold"]["state"] == "failed"
    assert flows["gold"]["error"].startswith("ConnectionError: password=***")
    (quality,) = pipeline["tables"]
    assert quality["rules"]["valid_temp"] == {"action": "drop", "passed": 95, "failed": 5}
    assert (quality["quarantine_table"], quality["quarantine_rows"]) == ("bronze_quarantine", 5)
    (one,) = json.loads(get(server.url + "api/state?series=gold")[2])["pipelines"]
    assert [("series" in f, f["name"]) for f in one["flows"]] == [(False, "bronze"), (True, "gold")]
    status, _, body = get(server.url + "api/events?limit=2")
    assert [e["event_type"] for e in json.loads(body)] == ["flow_failed", "expectations"]


def test_metrics_expose_the_same_figures(server):
    status, headers, body = get(server.url + "metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    bronze = (("flow", "bronze"), ("pipeline", "iot"))
    assert samples[("lakefeed_flow_input_rows_per_second", bronze)] == 400.0
    assert samples[("lakefeed_flow_processed_rows_per_second", bronze)] == 100.0
    assert samples[("lakefeed_flow_batch_duration_seconds", bronze)] == pytest.approx(0.2)
    assert samples[("lakefeed_flow_state_rows", bronze)] == 20
    assert samples[("lakefeed_flow_rows_dropped_by_watermark_total", bronze)] == 6
    assert samples[("lakefeed_flow_batches_total", bronze)] == 3
    assert samples[("lakefeed_flow_backpressure", bronze)] == 1.0  # 3 batches input > processed
    gold_failed = (("flow", "gold"), ("pipeline", "iot"), ("state", "failed"))
    assert samples[("lakefeed_flow_state", gold_failed)] == 1.0
    rule = (
        ("action", "drop"),
        ("outcome", "failed"),
        ("pipeline", "iot"),
        ("rule", "valid_temp"),
        ("table", "bronze"),
    )
    assert samples[("lakefeed_expectation_rows_total", rule)] == 5
    table = (("pipeline", "iot"), ("table", "bronze"))
    assert samples[("lakefeed_quarantined_rows_total", table)] == 5
    assert SECRET.encode() not in body


def test_bad_requests_get_a_reason(server):
    status, _, body = get(server.url + "api/tables/nope")
    assert status == 400 and b"no table 'nope'" in body
    status, _, body = get(server.url + "api/tables/gold/chart")
    assert status == 400 and b"chart needs" in body


def test_token_is_required_and_checked(pipeline_log):
    handle = start_server(pipeline_log, port=0, token="t0k-en-5f2a9c71d3")
    try:
        assert get(handle.url + "api/state")[0] == 401
        assert get(handle.url + "metrics", {"Authorization": "Bearer wrong"})[0] == 401
        assert get(handle.url + "metrics", {"Authorization": "Bearer t0k-en-5f2a9c71d3"})[0] == 200
        status, headers, _ = get(handle.url + "?token=t0k-en-5f2a9c71d3")
        assert status == 200
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert get(handle.url + "api/state", {"Cookie": cookie.split(";")[0]})[0] == 200
        assert get(handle.url + "api/state", {"Cookie": "lakefeed_token=nope"})[0] == 401
        assert "t0k-en-5f2a9c71d3" not in handle.url
    finally:
        handle.stop()


def test_non_loopback_address_needs_a_token(lakehouse):
    with pytest.raises(ValueError, match="set a token"):
        start_server(lakehouse, host="0.0.0.0", port=0)


def test_busy_port_is_reported(lakehouse):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError, match="cannot serve the UI on 127.0.0.1"):
            start_server(lakehouse, port=taken.getsockname()[1])


def test_empty_lakehouse_serves_an_empty_state(lakehouse):
    handle = start_server(lakehouse, port=0)
    try:
        status, _, body = get(handle.url + "api/state")
        assert status == 200 and json.loads(body)["pipelines"] == []
        assert get(handle.url + "api/tables")[2] == b"[]"
        assert get(handle.url)[0] == 200
    finally:
        handle.stop()


@pytest.mark.parametrize(
    "query",
    [
        "api/tables/readings/chart?time=t&measure=y&bucket_s=nan",
        "api/tables/readings/chart?time=t&measure=y&bucket_s=inf",
        "api/tables/readings/chart?time=t&measure=y&bucket_s=-5",
        "api/tables/readings/chart?time=t&measure=y&bucket_s=soon",
        "api/tables/readings/chart?time=t&measure=y&points=0",
        "api/tables/readings/chart?time=t&measure=y&points=1.5",
        "api/tables/readings/chart?time=t&measure=y&agg=median",
        "api/tables/readings/chart?time=nope&measure=y",
        "api/tables/nope/chart?time=t&measure=y&bucket_s=60",
        "api/tables/readings?limit=-3",
        "api/tables/readings?limit=lots",
        "api/tables/readings?order_by=nope",
        "api/events?limit=-1",
        "api/events?limit=ten",
    ],
)
def test_bad_query_parameters_get_400_with_a_reason(server, pipeline_log, query):
    at = datetime(2026, 3, 1, tzinfo=UTC)
    readings = pa.table({"t": [at, at + timedelta(seconds=90)], "y": [1.0, 2.0]})
    write_deltalake(str(pipeline_log.table_path("readings")), readings, mode="overwrite")
    status, _, body = get(server.url + query)
    assert status == 400, body
    assert json.loads(body)["error"]
    assert get(server.url + "api/tables/readings/chart?time=t&measure=y&bucket_s=60")[0] == 200


WEAK = [" ", "", "short-token", " " * 20, "a" * 20, "abcd efgh ijkl mnop"]


@pytest.mark.parametrize("token", WEAK)
def test_weak_tokens_are_refused(lakehouse, token):
    with pytest.raises(ConfigError, match="too weak") as refused:
        start_server(lakehouse, host="0.0.0.0", port=0, token=token)
    assert code_of(refused.value) == "UI_TOKEN"
    with pytest.raises(ConfigError, match="too weak"):
        start_server(lakehouse, port=0, token=token)
