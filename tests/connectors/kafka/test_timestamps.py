"""Offsets by time (startingTimestamp, startingOffsetsByTimestamp, endingTimestamp, ...) against
the real tansu broker: the batch plan needs no Spark, one stream shows the query side."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from lakefeed.connectors.kafka.offsets import OffsetRange
from lakefeed.connectors.kafka.options import KafkaOptionError, parse_source_options
from lakefeed.connectors.kafka.source import KafkaBatchReader
from tests.connectors.kafka.broker import Tansu
from tests.connectors.kafka.test_stream import kafka_stream, offsets_read, run_available_now


def now_ms() -> int:
    return int(time.time() * 1000)


def produce_phases(broker: Tansu, phases: int, per_phase: int = 5) -> tuple[str, list[int]]:
    """A 2-partition topic filled in ``phases`` rounds; returns the times between rounds.

    Offsets of round k are [k * per_phase, (k + 1) * per_phase) in each partition; times[k] is
    after round k and before round k + 1 (tansu looks times up by its append time, so the rounds
    are spaced out by real time).
    """
    topic = broker.create_topic(2)
    times = []
    for phase in range(phases):
        for partition in range(2):
            broker.produce(topic, [f"r{phase}"] * per_phase, partition=partition)
        time.sleep(0.15)
        times.append(now_ms())
        time.sleep(0.15)
    return topic, times


def planned(broker: Tansu, topic: str, **options: Any) -> list[tuple[int, int, int]]:
    """(partition, start, end) of the batch read's tasks."""
    parsed = parse_source_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic, **options}, batch=True
    )
    ranges = [p.value for p in KafkaBatchReader(parsed).partitions()]
    assert all(isinstance(r, OffsetRange) for r in ranges)
    return sorted((r.partition, r.start, r.end) for r in ranges)


@pytest.fixture(scope="module")
def rounds(broker: Tansu) -> tuple[str, list[int]]:
    """Three rounds of 5 messages per partition: offsets 0-4, 5-9, 10-14."""
    return produce_phases(broker, 3)


def test_timestamps_pick_the_first_offset_at_or_after_the_time(
    broker: Tansu, rounds: tuple[str, list[int]]
) -> None:
    topic, (t0, t1, t2) = rounds
    assert planned(broker, topic, startingTimestamp=t0, endingTimestamp=t1) == [
        (0, 5, 10),
        (1, 5, 10),
    ]
    by_partition = planned(
        broker,
        topic,
        startingOffsetsByTimestamp=json.dumps({topic: {"0": t1, "1": 0}}),
        endingOffsetsByTimestamp=json.dumps({topic: {"0": t2 + 60_000, "1": t0}}),
    )
    # Partition 0: from round 2 to the end (no offset after the ending time → latest).
    assert by_partition == [(0, 10, 15), (1, 0, 5)]


def test_spark_precedence_timestamp_over_json_over_offsets(
    broker: Tansu, rounds: tuple[str, list[int]]
) -> None:
    topic, (t0, t1, t2) = rounds
    each = {"0": t0, "1": t0}
    everything = {
        "startingTimestamp": t1,  # → 10
        "startingOffsetsByTimestamp": json.dumps({topic: each}),  # → 5
        "startingOffsets": "earliest",  # → 0
        "endingTimestamp": t2 + 60_000,  # nothing after it → latest, 15
        "endingOffsetsByTimestamp": json.dumps({topic: {"0": t1, "1": t1}}),  # → 10
        "endingOffsets": json.dumps({topic: {"0": 12, "1": 12}}),
    }
    assert planned(broker, topic, **everything) == [(0, 10, 15), (1, 10, 15)]
    del everything["startingTimestamp"], everything["endingTimestamp"]
    assert planned(broker, topic, **everything) == [(0, 5, 10), (1, 5, 10)]
    del everything["startingOffsetsByTimestamp"], everything["endingOffsetsByTimestamp"]
    assert planned(broker, topic, **everything) == [(0, 0, 12), (1, 0, 12)]


def test_no_offset_after_the_time_fails_clearly_or_starts_at_latest(
    broker: Tansu, rounds: tuple[str, list[int]]
) -> None:
    topic, _ = rounds
    later = now_ms() + 3_600_000
    with pytest.raises(KafkaOptionError) as info:
        planned(broker, topic, startingTimestamp=later)
    message = str(info.value)
    assert "startingTimestamp: no offset has a timestamp at or after" in message
    assert f"{topic}-0 ({later} ms), {topic}-1 ({later} ms)" in message
    assert "startingOffsetsByTimestampStrategy to latest" in message
    assert (
        planned(broker, topic, startingTimestamp=later, startingOffsetsByTimestampStrategy="LATEST")
        == []
    )
    with pytest.raises(KafkaOptionError, match="missing: .*-1"):
        planned(broker, topic, startingOffsetsByTimestamp=json.dumps({topic: {"0": 0}}))


@pytest.mark.parametrize(
    ("options", "batch", "message"),
    [
        ({"startingTimestamp": "yesterday"}, True, "startingTimestamp must be a time in ms"),
        ({"startingTimestamp": "-5"}, False, "startingTimestamp must be a time in ms"),
        ({"startingOffsetsByTimestamp": "{}"}, False, "must be JSON like"),
        ({"startingOffsetsByTimestamp": '{"a": {"0": -1}}'}, False, "is not a timestamp in ms"),
        ({"endingOffsetsByTimestamp": '{"a": [1]}'}, True, "needs {partition: value}"),
        ({"endingTimestamp": "5"}, False, "endingTimestamp only applies to batch reads"),
        ({"endingOffsetsByTimestamp": '{"a": {"0": 5}}'}, False, "only applies to batch"),
        ({"startingTimestamp": "9", "endingTimestamp": "9"}, True, "must be after"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, False, "must be error .* or latest"),
        ({"startingTimestamps": "1"}, False, "Did you mean startingTimestamp?"),
    ],
)
def test_misconfigured_times_are_refused_when_parsed(
    options: dict[str, str], batch: bool, message: str
) -> None:
    with pytest.raises(KafkaOptionError, match=message):
        parse_source_options(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", **options}, batch=batch
        )


def test_stream_from_a_time_and_refused_before_it_starts(
    spark: Any, broker: Tansu, rounds: tuple[str, list[int]], tmp_path: Path
) -> None:
    topic, (t0, _, _) = rounds
    df = kafka_stream(spark, broker, subscribe=topic, startingTimestamp=t0)
    run_available_now(df, tmp_path / "out", tmp_path / "cp")
    assert offsets_read(spark, tmp_path / "out") == [(p, o) for p in range(2) for o in range(5, 15)]
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy must be"):
        kafka_stream(spark, broker, subscribe=topic, startingOffsetsByTimestampStrategy="newest")
