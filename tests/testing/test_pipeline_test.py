"""lakefeed.testing on the IoT example: fixed batches in, tables, quarantine and windows out."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lakefeed.core.errors import ConfigError
from lakefeed.pipeline.api import config, set_config
from lakefeed.testing import PipelineTest

IOT = Path(__file__).resolve().parents[2] / "examples" / "iot"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _reading(offset: int, event_id: str, seconds: int, temperature: float = 20.0) -> dict:
    at = T0 + timedelta(seconds=seconds)
    payload = {
        "event_id": event_id,
        "device_id": "d1",
        "event_time": at.isoformat(),
        "temperature": temperature,
        "humidity": 40.0,
        "battery": 90.0,
    }
    return {"offset": offset, "ingest_time": at, "device_id": "d1", "value": json.dumps(payload)}


def test_batches_flow_through_quarantine_and_close_windows(spark, tmp_path: Path) -> None:
    pipe = PipelineTest(IOT, tmp_path, spark=spark)
    first = [_reading(0, "e0", 10), _reading(1, "e1", 60), _reading(2, "e2", 120, 400.0)]
    first += [_reading(3, "e1", 61)]  # a re-sent duplicate
    first += [{"offset": 4, "ingest_time": T0, "device_id": "d1", "value": "not json"}]
    pipe.feed("bronze_readings", first)
    pipe.step()

    assert [r["event_id"] for r in pipe.rows("silver_readings", ["event_id"])] == ["e0", "e1"]
    assert sorted(r["raw_payload"] or "" for r in pipe.quarantine("silver_readings")) == [
        "",
        "not json",
    ]  # the hot reading (temp_in_range) and the unparsable one
    counts = pipe.expectations("silver_readings")
    assert counts["valid_json"] == {"passed": 3, "failed": 1}  # after dedup
    assert counts["temp_in_range"]["failed"] == 2  # the hot one, and null in the unparsable one
    assert pipe.rows("gold_device_5min") == []  # the window [00:00, 00:05) is still open

    pipe.feed("bronze_readings", [_reading(5, "e5", 600)])  # event time moves to 00:10
    pipe.step()
    (window,) = pipe.rows("gold_device_5min")
    assert window["window_start"] == T0 and window["readings"] == 2


def test_feeding_an_unknown_flow_is_refused(spark, tmp_path: Path) -> None:
    pipe = PipelineTest(IOT, tmp_path, spark=spark)
    with pytest.raises(ConfigError, match="no flow 'bronze'"):
        pipe.feed("bronze", [])


def test_a_pipeline_under_test_has_only_its_own_configuration(spark, tmp_path: Path) -> None:
    """What an earlier pipeline of the process set (``conf=``, a spec's ``configuration``)
    never reaches it: here a state-memory share that alone would refuse the IoT example."""
    set_config({"lakefeed.state.writeBufferRatio": "0.3"})
    pipe = PipelineTest(IOT, tmp_path, spark=spark)
    assert config("lakefeed.state.writeBufferRatio") is None
    pipe.feed("bronze_readings", [_reading(0, "a", 0)])
    pipe.step()
    assert len(pipe.rows("bronze_readings")) == 1
