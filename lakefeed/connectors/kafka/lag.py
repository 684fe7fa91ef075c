"""How far a Kafka-reading query is behind the broker, from one micro-batch's progress.

Spark puts each source's ``endOffset`` (what the batch read up to) and ``latestOffset`` (what the
broker had, filled by the reader's ``reportLatestOffset``) into ``StreamingQueryProgress``. Both
use Spark's Kafka offset JSON, ``{"topic": {"0": 42}}``. The runtime's event log, ``lakefeed
status``, the UI and ``/metrics`` all call :func:`lag_from_progress`, so it is pure Python and
accepts the offsets either parsed or as JSON text (Spark hands out both forms).
"""

from __future__ import annotations

import json
from typing import Any

from lakefeed.connectors.kafka.offsets import TOPIC_IDS

#: Spark describes a Python data source as ``...PythonMicroBatchStream...@hash`` (no format name),
#: and its own Kafka source as ``KafkaV2[...]``; the offset shape tells Kafka from the rest.
_KAFKA_MARKERS = ("pythonmicrobatchstream", "kafka")


def _parse(offsets: Any) -> Any:
    """Offsets as parsed JSON, without the topic ids the source records beside them."""
    if isinstance(offsets, str):
        try:
            offsets = json.loads(offsets)
        except ValueError:
            return None
    if isinstance(offsets, dict) and TOPIC_IDS in offsets:
        return {topic: parts for topic, parts in offsets.items() if topic != TOPIC_IDS}
    return offsets


def _is_kafka_offsets(offsets: Any) -> bool:
    """True for ``{"topic": {"<partition number>": <int>}}`` (Spark's Kafka offset JSON)."""
    if not isinstance(offsets, dict) or not offsets:
        return False
    for partitions in offsets.values():
        if not isinstance(partitions, dict):
            return False
        for partition, offset in partitions.items():
            if not (isinstance(partition, str) and partition.lstrip("-").isdigit()):
                return False
            if not isinstance(offset, int) or isinstance(offset, bool):
                return False
    return True


def is_kafka_source(source_progress: dict[str, Any]) -> bool:
    description = str(source_progress.get("description", "")).lower()
    if not any(marker in description for marker in _KAFKA_MARKERS):
        return False
    latest = _parse(source_progress.get("latestOffset"))
    end = _parse(source_progress.get("endOffset"))
    return any(_is_kafka_offsets(o) for o in (latest, end))


def lag_from_progress(source_progress: dict[str, Any]) -> dict[str, Any] | None:
    """``{"total": int, "partitions": {"topic-partition": int}}`` for a Kafka source, else None.

    Lag of a partition is ``latestOffset - endOffset`` (never negative). A partition the broker
    reports but the batch has not reached yet (new partition) counts from 0. Returns None for
    non-Kafka sources and for Kafka sources whose progress has no latest offsets yet.
    """
    if not is_kafka_source(source_progress):
        return None
    latest = _parse(source_progress.get("latestOffset"))
    end = _parse(source_progress.get("endOffset"))
    if not _is_kafka_offsets(latest):
        return None
    end = end if _is_kafka_offsets(end) else {}
    partitions: dict[str, int] = {}
    for topic, topic_latest in sorted(latest.items()):
        topic_end = end.get(topic, {})
        for partition, latest_offset in sorted(topic_latest.items(), key=lambda kv: int(kv[0])):
            consumed = topic_end.get(partition, 0)
            partitions[f"{topic}-{partition}"] = max(int(latest_offset) - int(consumed), 0)
    return {"total": sum(partitions.values()), "partitions": partitions}
