"""The examples' own tests, written with lakefeed.testing: no broker, no clock, fixed batches."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakefeed.testing import PipelineTest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _record(offset: int, value: str, partition: int = 0) -> dict:
    """A Kafka record as ``lf.read_kafka`` gives it (value as bytes)."""
    at = T0 + timedelta(seconds=offset)
    return {
        "key": b"d1",
        "value": value.encode(),
        "topic": "iot-readings",
        "partition": partition,
        "offset": offset,
        "timestamp": at,
        "timestampType": 0,
    }


def _reading(event_id: str, seconds: int, temperature: float = 21.0, battery: float = 90.0) -> str:
    at = T0 + timedelta(seconds=seconds)
    return json.dumps(
        {
            "event_id": event_id,
            "device_id": "d1",
            "event_time": at.isoformat(),
            "temperature": temperature,
            "humidity": 40.0,
            "battery": battery,
        }
    )


def test_kafka_ingest_without_a_broker(spark, tmp_path: Path) -> None:
    pipe = PipelineTest(EXAMPLES / "kafka_ingest", tmp_path, spark=spark)
    pipe.feed(
        "bronze_kafka",
        [
            _record(0, _reading("e0", 0)),
            _record(1, _reading("e1", 30, battery=5.0)),  # low battery: warned, kept
            _record(2, _reading("e1", 30, battery=5.0)),  # re-sent by the device: dropped
            _record(3, _reading("e2", 60, temperature=400.0)),  # out of range: quarantined
            _record(4, "{not json"),  # quarantined
        ],
    )
    pipe.step()

    assert [r["offset"] for r in pipe.rows("bronze_kafka", ["offset"])] == [0, 1, 2, 3, 4]
    assert [r["event_id"] for r in pipe.rows("silver_readings", ["event_id"])] == ["e0", "e1"]
    quarantined = pipe.quarantine("silver_readings")
    assert sorted(r["event_id"] or "-" for r in quarantined) == ["-", "e2"]
    counts = pipe.expectations("silver_readings")
    # every rule sees every row after dedup (a null result fails): e0 and e2 pass battery_ok
    assert counts["battery_ok"] == {"passed": 2, "failed": 2}
    assert counts["valid_json"]["failed"] == 1
