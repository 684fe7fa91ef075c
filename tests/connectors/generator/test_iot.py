"""Spark-free tests of the generator core: determinism, shares of dirty data, options."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from lakefeed.connectors.generator.iot import (
    ARROW_SCHEMA,
    DUPLICATE_HORIZON_SECONDS,
    MALFORMED_KINDS,
    NOT_JSON_LENGTH,
    TEMPERATURE_RANGE,
    GeneratorOptionError,
    IotConfig,
    available_rows,
    generate_batch,
    iter_batches,
    paced_batches,
    parse_start_time,
)
from lakefeed.connectors.generator.source import SCHEMA

START = parse_start_time("2026-03-01T12:00:00Z")
ROWS = 40_000


def config(**fields: object) -> IotConfig:
    return IotConfig(start_time_ms=START, **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sample() -> list[dict]:
    """A stream with generous dirty-data rates, classified row by row."""
    cfg = config(
        rows_per_second=500,
        duplicate_rate=0.05,
        malformed_rate=0.06,
        late_rate=0.04,
        out_of_order_seconds=5,
        max_late_seconds=120,
    )
    return [classify(row) for row in generate_batch(cfg, 0, ROWS).to_pylist()]


def classify(row: dict) -> dict:
    """What silver would see in a row: its parsed payload and why it fails, if it does."""
    try:
        payload = json.loads(row["value"])
    except json.JSONDecodeError:
        return {**row, "payload": None, "problem": "not_json"}
    temperature = payload.get("temperature")
    problem = None
    if "temperature" not in payload:
        problem = "missing_field"
    elif not isinstance(temperature, float):
        problem = "wrong_type"
    elif not TEMPERATURE_RANGE[0] <= temperature <= TEMPERATURE_RANGE[1]:
        problem = "out_of_range"
    elif payload["device_id"] is None:
        problem = "null_device"
    elif payload["device_id"] == "":
        problem = "empty_device"
    return {**row, "payload": payload, "problem": problem}


def test_batches_are_a_pure_function_of_the_offsets() -> None:
    cfg = config()
    whole = generate_batch(cfg, 0, 5_000)
    assert generate_batch(cfg, 0, 5_000).equals(whole)
    pieces = pa.Table.from_batches(
        [generate_batch(cfg, 0, 1_234), *iter_batches(cfg, 1_234, 5_000, batch_rows=999)]
    )
    assert pieces.equals(pa.Table.from_batches([whole]))
    assert generate_batch(cfg, 4_000, 4_100).equals(whole.slice(4_000, 100))
    other_seed = generate_batch(config(seed=1), 0, 5_000)
    assert other_seed.column("offset").equals(whole.column("offset"))
    assert not other_seed.column("value").equals(whole.column("value"))


def test_schema_is_what_spark_expects_from_an_arrow_reader() -> None:
    assert to_arrow_schema(SCHEMA, timezone="UTC") == ARROW_SCHEMA
    assert generate_batch(config(), 0, 10).schema == ARROW_SCHEMA
    assert generate_batch(config(), 7, 7).num_rows == 0


def test_ingest_time_is_the_arrival_time_of_each_row() -> None:
    batch = generate_batch(config(rows_per_second=400), 1_000, 1_004)
    ingest = [t.timestamp() * 1000 for t in batch.column("ingest_time").to_pylist()]
    assert ingest == [START + 2_500, START + 2_502.5, START + 2_505, START + 2_507.5]


def test_clean_rows_are_well_formed(sample: list[dict]) -> None:
    clean = [row for row in sample if row["problem"] is None]
    assert len(clean) > 0.85 * ROWS
    for row in clean:
        payload = row["payload"]
        assert set(payload) == {
            "event_id",
            "device_id",
            "event_time",
            "temperature",
            "humidity",
            "battery",
        }
        assert re.fullmatch(r"[0-9a-f]{16}", payload["event_id"])
        assert re.fullmatch(r"dev-000\d\d", payload["device_id"])
        assert payload["device_id"] == row["device_id"]
        assert 0 <= payload["humidity"] <= 100 and 5 <= payload["battery"] <= 100
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", payload["event_time"])
    assert len({row["device_id"] for row in clean}) == 100


def test_malformed_rows_of_every_kind_at_the_configured_share(sample: list[dict]) -> None:
    problems = [row["problem"] for row in sample if row["problem"]]
    assert len(problems) / ROWS == pytest.approx(0.06, abs=0.006)
    kinds = {kind: problems.count(kind) for kind in set(problems)}
    assert set(kinds) == set(MALFORMED_KINDS) and len(MALFORMED_KINDS) == 6
    assert min(kinds.values()) > len(problems) / 6 * 0.7
    for row in sample:
        if row["problem"] == "not_json":
            assert len(row["value"]) == NOT_JSON_LENGTH
        if row["problem"] == "null_device":
            assert row["device_id"] is None
        if row["problem"] == "empty_device":
            assert row["device_id"] == ""


def test_duplicates_resend_an_earlier_payload_within_the_horizon(sample: list[dict]) -> None:
    first_seen: dict[str, int] = {}
    resent = 0
    for row in sample:
        earlier = first_seen.setdefault(row["value"], row["offset"])
        if earlier != row["offset"]:
            resent += 1
            assert sample[earlier]["device_id"] == row["device_id"]
            assert 0 < row["offset"] - earlier <= 500 * DUPLICATE_HORIZON_SECONDS + 10
    assert resent / ROWS == pytest.approx(0.05, abs=0.005)
    no_duplicates = generate_batch(config(duplicate_rate=0.0), 0, ROWS).column("value")
    assert len(set(no_duplicates.to_pylist())) == ROWS


def test_event_time_lags_ingest_time_out_of_order_and_late(sample: list[dict]) -> None:
    first_ingest: dict[str, datetime] = {}
    lags = []
    for row in sample:
        if row["payload"] is None:
            continue
        # A duplicate carries its first sending's event time: measure against that arrival.
        ingest = first_ingest.setdefault(row["payload"]["event_id"], row["ingest_time"])
        event = datetime.fromisoformat(row["payload"]["event_time"].replace("Z", "+00:00"))
        lags.append((ingest - event).total_seconds())
    assert min(lags) >= 0 and max(lags) <= 120.001
    assert max(lags) > 100
    late = sum(lag > 5.0005 for lag in lags)
    assert late / len(lags) == pytest.approx(0.04, abs=0.005)


def test_clean_stream_has_no_dirty_rows() -> None:
    cfg = config(duplicate_rate=0.0, malformed_rate=0.0, late_rate=0.0)
    rows = [classify(row) for row in generate_batch(cfg, 0, 5_000).to_pylist()]
    assert all(row["problem"] is None for row in rows)


def test_available_rows_follows_the_arrival_clock() -> None:
    cfg = config(rows_per_second=1000)
    assert available_rows(cfg, now_ms=START - 1) == 0
    assert available_rows(cfg, now_ms=START) == 1
    assert available_rows(cfg, now_ms=START + 1_000) == 1_001
    assert available_rows(config(rows_per_second=3), now_ms=START + 1_000) == 4
    assert available_rows(config(total_rows=50), now_ms=START + 1_000) == 50
    slow = config(rows_per_second=7)
    for now in range(START, START + 3_000, 37):
        n = available_rows(slow, now_ms=now)
        arrived = generate_batch(slow, n - 1, n + 1).column("ingest_time").to_pylist()
        assert arrived[0].timestamp() * 1000 <= now < arrived[1].timestamp() * 1000


def test_options_are_parsed_case_insensitively() -> None:
    cfg = IotConfig.from_options(
        {"ROWSPERSECOND": "2000", "devices": "7", "Seed": "-3", "startTime": "2026-03-01T12:00"}
    )
    assert (cfg.rows_per_second, cfg.devices, cfg.seed) == (2000, 7, -3)
    assert cfg.start_time_ms == START == parse_start_time(str(START))
    assert parse_start_time("2026-03-01T13:00:00+01:00") == START
    assert IotConfig.from_options({}) == IotConfig()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rowsPerSec": "5"}, "unknown option 'rowsPerSec' for the lakefeed_iot source (did you"),
        ({"rowspersecnd": "5"}, "(did you mean rowsPerSecond?)"),
        ({"path": "/tmp/x"}, "unknown option 'path' for the lakefeed_iot source; valid"),
        ({"rowsPerSecond": "fast"}, "rowsPerSecond must be an integer"),
        ({"rowsPerSecond": "0"}, "rowsPerSecond must be at least 1"),
        ({"devices": "0"}, "devices must be at least 1"),
        ({"totalRows": "-1"}, "totalRows must be >= 0"),
        ({"maxRowsPerTrigger": "0"}, "maxRowsPerTrigger must be at least 1"),
        ({"lateRate": "1.5"}, "lateRate must be between 0 and 1"),
        ({"duplicateRate": "0.95"}, "duplicateRate must be between 0 and 0.9"),
        ({"malformedRate": "nan"}, "malformedRate must be a finite number"),
        ({"outOfOrderSeconds": "-1"}, "outOfOrderSeconds must be >= 0"),
        ({"outOfOrderSeconds": "60", "maxLateSeconds": "30"}, "maxLateSeconds must be >= "),
        ({"startTime": "yesterday"}, "startTime must be epoch milliseconds or an ISO-8601"),
    ],
)
def test_invalid_options_are_refused_by_name(options: dict[str, str], message: str) -> None:
    with pytest.raises(GeneratorOptionError, match=re.escape(message)):
        IotConfig.from_options(options)


def test_unresolved_start_time_is_refused() -> None:
    with pytest.raises(ValueError, match="resolved"):
        generate_batch(IotConfig(), 0, 1)
    assert IotConfig().resolved(now_ms=42).start_time_ms == 42


def test_paced_batches_deliver_rows_as_they_arrive() -> None:
    cfg = IotConfig(rows_per_second=20_000, total_rows=3_000).resolved()
    began = time.monotonic()
    batches = list(paced_batches(cfg, start=500, max_batch_rows=1_000))
    elapsed = time.monotonic() - began
    assert elapsed >= 0.1  # row 2999 arrives 150 ms after the start time
    assert all(batch.num_rows <= 1_000 for batch in batches)
    assert pa.Table.from_batches(batches).equals(
        pa.Table.from_batches([generate_batch(cfg, 500, 3_000)])
    )
    past = config(total_rows=2_500)  # a backlog is delivered at once, in bounded batches
    assert [b.num_rows for b in paced_batches(past, max_batch_rows=1_000)] == [1000, 1000, 500]
