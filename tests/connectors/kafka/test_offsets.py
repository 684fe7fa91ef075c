"""Offsets model, batch planning, rate limits and data-loss rules (pure functions)."""

from __future__ import annotations

import pytest

from lakefeed.connectors.kafka.offsets import (
    TOPIC_IDS,
    OffsetRange,
    committed_input,
    from_json,
    initial_offsets,
    plan_end,
    plan_ranges,
    rate_limit,
    restart_recreated,
    split_ranges,
    to_json,
    topic_ids,
)
from lakefeed.connectors.kafka.options import EARLIEST, LATEST

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_json_round_trip_in_sparks_form() -> None:
    offsets = {A1: 7, A0: 3, B0: 0}
    assert to_json(offsets) == {"a": {"0": 3, "1": 7}, "b": {"0": 0}}
    assert from_json(to_json(offsets)) == offsets


def test_topic_ids_ride_along_without_changing_the_offsets() -> None:
    offsets = {A0: 3, B0: 0}
    recorded = to_json(offsets, {"a": "id-a", "gone": "id-x"})
    assert recorded == {"a": {"0": 3}, "b": {"0": 0}, TOPIC_IDS: {"a": "id-a"}}
    assert from_json(recorded) == offsets and topic_ids(recorded) == {"a": "id-a"}
    assert to_json(offsets, {}) == to_json(offsets)  # a broker without ids: Spark's form
    options = {
        "kafka.bootstrap.servers": "h:9092",
        "subscribe": "a,b",
        "startingOffsets": "earliest",
    }
    assert committed_input(options, recorded) == committed_input(options, to_json(offsets))


def test_a_recreated_topic_is_data_loss_read_again_from_earliest() -> None:
    start = to_json({A0: 100, A1: 40, B0: 7}, {"a": "old", "b": "same"})
    offsets, found = restart_recreated(start, {"a": "new", "b": "same"})
    assert offsets == {B0: 7}  # a-0 and a-1 are new partitions now: read from earliest
    assert len(found) == 1 and "topic a was deleted and created again" in found[0]
    assert "failOnDataLoss=false" in found[0]
    plan = plan_end(offsets, {A0: (0, 150), A1: (0, 0), B0: (0, 7)})
    assert plan.end == {A0: 150, A1: 0, B0: 7} and plan.data_loss == ()
    assert plan_ranges(offsets, plan.end, {A0: 0, A1: 0}) == [OffsetRange("a", 0, 0, 150)]


def test_offsets_without_ids_are_not_checked() -> None:
    old = to_json({A0: 100})  # written before ids were recorded
    assert restart_recreated(old, {"a": "new"}) == ({A0: 100}, ())
    # and a topic the broker gives no id (deleted, or an old broker) is not reported here
    assert restart_recreated(to_json({A0: 1}, {"a": "x"}), {}) == ({A0: 1}, ())


def test_initial_offsets_symbolic_and_json() -> None:
    assert initial_offsets("latest", [A0, A1], False) == {A0: LATEST, A1: LATEST}
    assert initial_offsets("earliest", [A0], False) == {A0: EARLIEST}
    assert initial_offsets({A0: 5, A1: -2}, [A0, A1], False) == {A0: 5, A1: EARLIEST}
    with pytest.raises(ValueError, match="missing: a-1"):
        initial_offsets({A0: 5}, [A0, A1], False)
    with pytest.raises(ValueError, match="not read by this query: b-0"):
        initial_offsets({A0: 5, B0: 1}, [A0], True)


def test_first_batch_from_latest_reads_nothing_but_fixes_the_end() -> None:
    plan = plan_end({A0: LATEST}, {A0: (0, 40)})
    assert plan.end == {A0: 40} and plan.data_loss == ()
    # Replaying [latest, 40) after a crash: still nothing, never "whatever is latest now".
    assert plan_ranges({A0: LATEST}, plan.end, {A0: 0}) == []


def test_earliest_and_new_partitions_start_at_low_watermark() -> None:
    plan = plan_end({A0: EARLIEST}, {A0: (10, 50), A1: (0, 5)})
    assert plan.end == {A0: 50, A1: 5}
    ranges = plan_ranges({A0: EARLIEST}, plan.end, {A0: 10, A1: 0})
    assert ranges == [OffsetRange("a", 0, 10, 50), OffsetRange("a", 1, 0, 5)]


def test_rate_limit_is_exact_and_proportional_to_lag() -> None:
    end = rate_limit({A0: 0, A1: 100, B0: 0}, {A0: 900, A1: 190, B0: 10}, 100)
    assert sum(end[tp] - begin for tp, begin in {A0: 0, A1: 100, B0: 0}.items()) == 100
    assert end == {A0: 90, A1: 109, B0: 1}
    assert rate_limit({A0: 0}, {A0: 5}, 100) == {A0: 5}


def test_max_offsets_and_available_now_target() -> None:
    plan = plan_end({A0: 0, A1: 0}, {A0: (0, 100), A1: (0, 100)}, max_offsets=10)
    assert plan.end == {A0: 5, A1: 5}
    capped = plan_end({A0: 0}, {A0: (0, 100)}, target={A0: 60})
    assert capped.end == {A0: 60}
    # A partition created after the availableNow target was taken is not read.
    assert plan_end({A0: 60}, {A0: (0, 100), A1: (0, 9)}, target={A0: 60}).end == {A0: 60}


def test_data_loss_cases_are_named() -> None:
    gone = plan_end({A0: 5, B0: 3}, {A0: (0, 10)})
    assert gone.data_loss == ("partition b-0 no longer exists (topic or partition deleted)",)
    assert gone.end == {A0: 10}
    aged = plan_end({A0: 5}, {A0: (8, 10)})
    assert "offsets 5..7 are no longer available" in aged.data_loss[0]
    backwards = plan_end({A0: 50}, {A0: (0, 10)})
    assert "went back from 50 to 10" in backwards.data_loss[0]
    assert backwards.end == {A0: 10}
    assert plan_ranges({A0: 50}, backwards.end, {}) == []
    # A high no fetch confirmed (brokers back from an outage; tansu's offset answer is low) is
    # no evidence: the partition stays put, reported as deferred, and nothing is lost.
    unsure = plan_end({A0: 1600, A1: 5}, {A0: (0, 1), A1: (0, 9)}, unconfirmed={A0})
    assert unsure.data_loss == ()
    assert unsure.end == {A0: 1600, A1: 9}
    assert "end offset 1 is below 1600" in unsure.deferred[0]
    assert plan_end({A0: 5}, {A0: (0, 9)}, unconfirmed={A0}).end == {A0: 9}


def test_split_ranges_min_partitions_and_max_records() -> None:
    ranges = [OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 0, 10)]
    split = split_ranges(ranges, min_partitions=10, max_records=None)
    assert len(split) == 10
    assert [r.size for r in split if r.partition == 0] == [10] * 9
    assert sum(r.size for r in split) == 100
    assert all(r.size > 0 for r in split)
    by_max = split_ranges(ranges, min_partitions=None, max_records=25)
    assert [r.size for r in by_max] == [22, 23, 22, 23, 10]
    tiny = split_ranges([OffsetRange("a", 0, 0, 2)], min_partitions=8, max_records=None)
    assert [(r.start, r.end) for r in tiny] == [(0, 1), (1, 2)]
