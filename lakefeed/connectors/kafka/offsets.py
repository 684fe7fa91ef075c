"""Offsets, batch planning and data-loss rules of the Kafka source (Spark-free).

Offsets live only in Spark's checkpoint, in Spark's Kafka JSON form ``{"topic": {"0": 42}}``
(``end`` is exclusive: the next offset to read). Everything here is a pure function of the
offsets it is given, so a micro-batch replayed after a crash plans exactly the same ranges.

A stream that starts at ``latest`` or ``earliest`` keeps that as the symbolic offset -1/-2 in
its first start offset; the first micro-batch then fixes concrete end offsets in the offset log.
Replaying that batch reads the same range, whereas re-resolving "latest" on restart (as a naive
source would) silently skips what arrived in between.

The offset JSON also records each topic's id under :data:`TOPIC_IDS`: a topic deleted and
created again under the same name gets a new id, and offsets of the old topic mean nothing in the
new one (reading on from them would skip the new topic's first records without a word). Offsets
written without ids (older checkpoints, brokers without topic ids) are read as before, unchecked.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakefeed.connectors.kafka.options import (
    EARLIEST,
    LATEST,
    OffsetMap,
    Timestamps,
    TopicPartition,
    parse_source_options,
)
from lakefeed.core.errors import CheckpointError

Watermarks = dict[TopicPartition, tuple[int, int]]
"""(low, high) per partition: the earliest available offset and the next offset to be written."""


TOPIC_IDS = "@topicIds"
"""Key of ``{"topic": "<topic id>"}`` in the offset JSON; ``@`` is not allowed in topic names."""

TopicIds = dict[str, str]


def to_json(
    offsets: Mapping[TopicPartition, int], topic_ids: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Spark's Kafka offset JSON, topics and partitions in a stable order, with the ids of the
    topics it names (those ``topic_ids`` knows)."""
    result: dict[str, dict[str, Any]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    known = topic_ids or {}
    ids = {topic: known[topic] for topic in sorted(result) if topic in known}
    if ids:
        result[TOPIC_IDS] = ids
    return result


def from_json(offsets: Mapping[str, Mapping[str, Any]] | None) -> OffsetMap:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in (offsets or {}).items()
        if topic != TOPIC_IDS
        for partition, offset in partitions.items()
    }


def topic_ids(offsets: Mapping[str, Any] | None) -> TopicIds:
    """The topic ids an offset JSON recorded (none in offsets written before ids were)."""
    return dict((offsets or {}).get(TOPIC_IDS) or {})


def recreated(recorded: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str]:
    """Topics whose id is not the one recorded (deleted and created again), each described."""
    return {
        topic: f"topic {topic} was deleted and created again (topic id {old} is now "
        f"{current[topic]}): the offsets read so far belong to the old topic, whose unread "
        "records are gone; with failOnDataLoss=false the new topic is read from its earliest "
        "offset"
        for topic, old in sorted(recorded.items())
        if topic in current and current[topic] != old
    }


def restart_recreated(
    start: Mapping[str, Any], current: Mapping[str, str]
) -> tuple[OffsetMap, tuple[str, ...]]:
    """``start``'s offsets without the partitions of recreated topics, which are then read from
    their earliest offset like new partitions (Spark's rule for a partition that reappears),
    and what was found."""
    found = recreated(topic_ids(start), current)
    offsets = {tp: offset for tp, offset in from_json(start).items() if tp[0] not in found}
    return offsets, tuple(found.values())


def describe(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


@dataclass(frozen=True)
class OffsetRange:
    """One task's work: offsets [start, end) of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _check_coverage(
    option: str, given: Iterable[TopicPartition], read: list[TopicPartition], *, strict: bool
) -> None:
    """Per-partition JSON must name every partition read (a partition left out is far more
    often a typo than a wish); ``strict`` also refuses partitions the query does not read."""
    missing = sorted(set(read) - set(given))
    unknown = sorted(set(given) - set(read))
    if missing or (unknown and strict):
        raise ValueError(
            f"{option} JSON must give every partition it reads"
            + (", using -2 for earliest and -1 for latest" if option == "startingOffsets" else "")
            + "; "
            + (f"missing: {', '.join(map(describe, missing))}" if missing else "")
            + (f" not read by this query: {', '.join(map(describe, unknown))}" if unknown else "")
        )


def initial_offsets(
    starting: str | OffsetMap, partitions: Iterable[TopicPartition], fixed_partitions: bool
) -> OffsetMap:
    """The stream's first start offset: symbolic -1/-2 or the user's numbers.

    With per-partition JSON Spark requires every partition to be listed;
    ``fixed_partitions`` (``assign``) also refuses partitions that are not read.
    """
    partitions = sorted(set(partitions))
    if isinstance(starting, str):
        code = LATEST if starting == "latest" else EARLIEST
        return dict.fromkeys(partitions, code)
    _check_coverage("startingOffsets", starting, partitions, strict=fixed_partitions)
    return {tp: starting[tp] for tp in partitions}


def times_for(times: Timestamps, partitions: Iterable[TopicPartition]) -> OffsetMap:
    """The time (ms) to look up for each partition read (Spark: JSON must match them exactly)."""
    partitions = sorted(set(partitions))
    if times.every is not None:
        return dict.fromkeys(partitions, times.every)
    _check_coverage(times.option, times.by_partition, partitions, strict=True)
    return {tp: times.by_partition[tp] for tp in partitions}


def at_times(
    times: Timestamps,
    wanted: Mapping[TopicPartition, int],
    found: Mapping[TopicPartition, int | None],
    *,
    if_none: str,
) -> OffsetMap:
    """Offsets for ``times`` given the broker's answers (None: no offset at or after the time).

    ``if_none`` is ``latest`` (use the latest offset, as symbolic -1) or ``error`` (fail, naming
    every such partition and the option that lets the query start anyway).
    """
    none = sorted(tp for tp in wanted if found.get(tp) is None)
    if none and if_none == "error":
        raise ValueError(
            f"{times.option}: no offset has a timestamp at or after the time given for "
            + ", ".join(f"{describe(tp)} ({wanted[tp]} ms)" for tp in none)
            + ". Set startingOffsetsByTimestampStrategy to latest to start such partitions at "
            "their latest offset, or use an earlier time"
        )
    return {tp: LATEST if (offset := found.get(tp)) is None else offset for tp in wanted}


def resolve(offset: int, watermarks: tuple[int, int]) -> int:
    """A concrete offset for a possibly symbolic one, given (low, high)."""
    low, high = watermarks
    if offset == EARLIEST:
        return low
    if offset == LATEST:
        return high
    return offset


@dataclass(frozen=True)
class Plan:
    """What ``latestOffset`` decided: concrete end offsets and any data loss it saw."""

    end: OffsetMap
    data_loss: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()  # partitions left where they are until the broker answers


def plan_end(
    start: Mapping[TopicPartition, int],
    watermarks: Watermarks,
    *,
    max_offsets: int | None = None,
    target: Mapping[TopicPartition, int] | None = None,
    unconfirmed: Collection[TopicPartition] = (),
) -> Plan:
    """End offsets of the next micro-batch, and the data loss between ``start`` and the broker.

    Partitions the broker has but ``start`` lacks are new and read from their earliest offset.
    ``target`` (Trigger.AvailableNow) caps every partition at the offsets seen when the query
    started; ``max_offsets`` (maxOffsetsPerTrigger) is shared between partitions in proportion
    to their lag, so a partition far behind catches up without starving the others.
    ``unconfirmed`` partitions have a high watermark no fetch could confirm (the brokers did
    not answer in time): an end below ``start`` there is not evidence of loss, so such a
    partition stays where it is this time instead of being reported.
    """
    losses: list[str] = []
    deferred: list[str] = []
    begin: OffsetMap = {}
    latest: OffsetMap = {}
    for tp in sorted(set(start) - set(watermarks)):
        losses.append(f"partition {describe(tp)} no longer exists (topic or partition deleted)")
    for tp, (low, high) in sorted(watermarks.items()):
        if target is not None and tp not in target and tp not in start:
            continue  # appeared after availableNow took its target: the next run reads it
        offset = start.get(tp, EARLIEST)
        cap = high if target is None else min(high, target.get(tp, max(offset, low)))
        if offset >= 0 and offset > high and tp in unconfirmed:
            deferred.append(
                f"{describe(tp)}: the broker's end offset {high} is below {offset} and no fetch "
                "confirmed it; not read this time"
            )
            begin[tp] = latest[tp] = offset
            continue
        if offset >= 0 and offset > high:
            losses.append(
                f"{describe(tp)}: offsets went back from {offset} to {high} "
                "(topic recreated or unclean leader election)"
            )
            begin[tp] = latest[tp] = high
            continue
        if offset >= 0 and offset < low:
            losses.append(
                f"{describe(tp)}: offsets {offset}..{low - 1} are no longer available "
                "(deleted by retention before they were read)"
            )
        begin[tp] = resolve(offset, (low, cap))
        latest[tp] = max(cap, begin[tp])
    end = latest if max_offsets is None else rate_limit(begin, latest, max_offsets)
    return Plan(end=end, data_loss=tuple(losses), deferred=tuple(deferred))


def rate_limit(
    begin: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_total: int
) -> OffsetMap:
    """Advance at most ``max_total`` offsets in all, shared in proportion to each lag.

    Largest-remainder rounding keeps the total exact and gives every lagging partition a share
    as soon as the budget allows, so no partition waits forever behind a busier one.
    """
    lag = {tp: max(latest[tp] - begin[tp], 0) for tp in latest}
    total = sum(lag.values())
    if total <= max_total:
        return dict(latest)
    shares = {tp: max_total * n / total for tp, n in lag.items()}
    granted = {tp: math.floor(s) for tp, s in shares.items()}
    left = max_total - sum(granted.values())
    by_remainder = sorted(shares, key=lambda tp: (granted[tp] - shares[tp], tp))
    for tp in by_remainder[:left]:
        granted[tp] += 1
    return {tp: begin[tp] + granted[tp] for tp in latest}


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    low: Mapping[TopicPartition, int],
    *,
    min_partitions: int | None = None,
    max_records: int | None = None,
) -> list[OffsetRange]:
    """The tasks of one batch: [start, end) per partition, split for parallelism.

    ``low`` resolves a symbolic earliest start (first batch, new partitions). A start at latest
    (-1) reads nothing: the first batch only fixes where the stream begins.
    """
    ranges: list[OffsetRange] = []
    for tp, stop in sorted(end.items()):
        begin = start.get(tp, EARLIEST)
        if begin == LATEST:
            continue
        if begin == EARLIEST:
            begin = low.get(tp, 0)
        if stop > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, stop))
    return split_ranges(ranges, min_partitions=min_partitions, max_records=max_records)


def split_ranges(
    ranges: list[OffsetRange], *, min_partitions: int | None, max_records: int | None
) -> list[OffsetRange]:
    """Split big ranges: at most ``max_records`` each, and at least ``min_partitions`` tasks.

    Like Spark's KafkaOffsetRangeCalculator, ranges are split in proportion to their size, so a
    hot partition gets more tasks than a quiet one.
    """
    counts = {r: 1 for r in ranges}
    if max_records:
        counts = {r: max(1, math.ceil(r.size / max_records)) for r in ranges}
    total = sum(r.size for r in ranges)
    if min_partitions and sum(counts.values()) < min_partitions and total > 0:
        for r in ranges:
            counts[r] = max(counts[r], math.ceil(r.size / total * min_partitions))
    result: list[OffsetRange] = []
    for r in ranges:
        parts = min(counts[r], r.size)
        bounds = [r.start + (r.size * i) // parts for i in range(parts + 1)]
        result.extend(
            OffsetRange(r.topic, r.partition, a, b)
            for a, b in zip(bounds, bounds[1:], strict=False)
        )
    return result


def _is_offset_json(offset: Any) -> bool:
    return isinstance(offset, dict) and all(
        isinstance(parts, dict)
        and (
            topic == TOPIC_IDS
            or all(str(p).isdigit() and isinstance(o, int) for p, o in parts.items())
        )
        for topic, parts in offset.items()
    )


def committed_input(
    options: Mapping[str, str], end: Any, first_end: Any = None
) -> dict[str, str] | None:
    """Batch options that read exactly the records a stream committed up to its offset ``end``
    (the last committed batch's end offsets); ``first_end``, the first batch's end, fixes where
    partitions started at ``latest`` began. None: ``end`` is not this source's offset."""
    if not _is_offset_json(end):
        return None
    stream = parse_source_options(options, batch=False)
    committed = from_json(end)
    if not committed or not all(stream.subscription.wants(topic) for topic, _ in committed):
        return None
    bounds = {"endingOffsets": json.dumps(to_json(committed))}
    starting = stream.starting
    if starting == "earliest" or isinstance(starting, Timestamps):
        return bounds  # the batch read resolves the same start again
    given = starting if isinstance(starting, dict) else dict.fromkeys(committed, LATEST)
    start = {tp: given.get(tp, EARLIEST) for tp in committed}
    first = from_json(first_end) if _is_offset_json(first_end) else {}
    unknown = sorted(tp for tp, offset in start.items() if offset == LATEST and tp not in first)
    if unknown:
        raise CheckpointError(
            f"the Kafka stream started at latest on {', '.join(map(describe, unknown))}, and its "
            "checkpoint no longer holds the first batch that fixed where",
            fix="compare a stream started at earliest or at given offsets",
        )
    start = {tp: first[tp] if offset == LATEST else offset for tp, offset in start.items()}
    return {**bounds, "startingOffsets": json.dumps(to_json(start))}
