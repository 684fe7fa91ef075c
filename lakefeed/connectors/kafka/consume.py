"""One task's read: exactly the offsets [start, end) of one partition, as Arrow batches.

Spark-free, so it is tested against a broker without a JVM. The consumer is assigned (never
subscribed, never committed): offsets live only in Spark's checkpoint, and a replayed batch reads
the very same range. The loop stops on the offset, not on "no more data", so a slow broker
cannot make a task return short; every wait is bounded by ``kafkaConsumer.pollTimeoutMs``.
"""

from __future__ import annotations

import logging
import time
from bisect import bisect_left
from collections.abc import Iterator
from itertools import chain, compress
from typing import Any, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from lakefeed.connectors.kafka.client import (
    DataLossError,
    KafkaSourceError,
    KafkaUnavailableError,
    data_loss_message,
    make_consumer,
)
from lakefeed.connectors.kafka.offsets import OffsetRange
from lakefeed.connectors.kafka.options import SourceOptions

log = logging.getLogger("lakefeed.kafka.source")

_TIMESTAMP = pa.timestamp("us", tz="UTC")
HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _TIMESTAMP),
    pa.field("timestampType", pa.int32()),
]
SPARK_DDL = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int"
)
"""Spark's Kafka source schema (``headers array<struct<key string, value binary>>`` optional)."""
HEADERS_DDL = ", headers array<struct<key: string, value: binary>>"

MAX_BATCH_ROWS = 20_000
"""Rows per Arrow batch: bounds a task's memory whatever the range size."""
_POLL_S = 1.0
_LOSS_CODES = {KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE}


def arrow_schema(include_headers: bool) -> pa.Schema:
    """Equal to ``to_arrow_schema(<Spark Kafka schema>, timezone="UTC")``."""
    return pa.schema(
        _BASE_FIELDS + ([pa.field("headers", HEADERS_TYPE)] if include_headers else [])
    )


def spark_ddl(include_headers: bool) -> str:
    return SPARK_DDL + (HEADERS_DDL if include_headers else "")


def _headers(message: Message) -> list[dict[str, Any]]:
    pairs: list[tuple[str, bytes]] = message.headers() or []  # type: ignore[assignment]
    return [{"key": key, "value": value} for key, value in pairs]


def _offset(message: Message) -> int:
    return message.offset() or 0


def _offsets(messages: list[Message]) -> np.ndarray:
    n = len(messages)
    first, last = _offset(messages[0]), _offset(messages[-1])
    if last - first == n - 1:  # no gaps (the usual case): no per-message call at all
        return np.arange(first, first + n, dtype=np.int64)
    return np.fromiter(map(Message.offset, messages), np.int64, n)


def to_record_batch(
    messages: list[Message], topic: str, partition: int, schema: pa.Schema
) -> pa.RecordBatch:
    """Messages of one partition → a batch in Spark's Kafka schema.

    The hot loop of the source. Each field is pulled out with ``map`` over the unbound C method
    (no Python bytecode per message) and becomes a column in one call. Profiled: per-message
    Python loops here and in :meth:`RangeReader._accept` cost more than librdkafka's
    ``consume`` itself.
    """
    n = len(messages)
    stamps = np.fromiter(
        chain.from_iterable(map(Message.timestamp, messages)), np.int64, 2 * n
    ).reshape(n, 2)
    # librdkafka: 0 none, 1 create, 2 log append; Java/Spark: -1 none, 0 create, 1 log append.
    kinds = stamps[:, 0].astype(np.int32)
    missing = kinds == 0
    columns: list[Any] = [
        pa.array(list(map(Message.key, messages)), pa.binary()),
        pa.array(list(map(Message.value, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(_offsets(messages), pa.int64()),
        pa.array(stamps[:, 1] * 1000, _TIMESTAMP, mask=missing if missing.any() else None),
        pa.array(kinds - 1, pa.int32()),
    ]
    if len(schema) > len(_BASE_FIELDS):
        columns.append(pa.array([_headers(m) for m in messages], HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


class RangeReader:
    """Reads one :class:`OffsetRange`; a class so each step stays small and testable."""

    def __init__(self, options: SourceOptions, offsets: OffsetRange) -> None:
        self.options = options
        self.range = offsets
        self.schema = arrow_schema(options.include_headers)
        self.next_offset = offsets.start
        self.broker_end: int | None = None

    def _consumer(self) -> Consumer:
        reset = "error" if self.options.fail_on_data_loss else "earliest"
        consumer = make_consumer(
            self.options, **{"auto.offset.reset": reset, "enable.partition.eof": True}
        )
        r = self.range
        consumer.assign([KafkaTopicPartition(r.topic, r.partition, r.start)])
        return consumer

    def batches(self) -> Iterator[pa.RecordBatch]:
        consumer = self._consumer()
        try:
            yield from self._read(consumer)
        finally:
            consumer.close()

    def _read(self, consumer: Consumer) -> Iterator[pa.RecordBatch]:
        r = self.range
        deadline = time.monotonic() + self.options.poll_timeout_s
        while self.next_offset < r.end:
            wanted = min(r.end - self.next_offset, MAX_BATCH_ROWS)
            good = self._accept(consumer.consume(num_messages=wanted, timeout=_POLL_S))
            if good:
                yield to_record_batch(good, r.topic, r.partition, self.schema)
                deadline = time.monotonic() + self.options.poll_timeout_s
            elif self.next_offset < r.end and time.monotonic() > deadline:
                self._give_up()
                return

    def _accept(self, messages: list[Message]) -> list[Message]:
        """Keep messages inside the range; handle end-of-partition and consumer errors.

        Errors are rare, so one C-level pass looks for them and the usual batch is cut at the
        range end by offset (bisect), never walked message by message in Python.
        """
        errors = list(compress(messages, map(Message.error, messages)))
        good = self._within_range(
            [m for m in messages if m.error() is None] if errors else messages
        )
        for message in errors:  # after the data: end-of-partition may complete the range
            self._on_error(cast(KafkaError, message.error()), message)
        return good

    def _within_range(self, messages: list[Message]) -> list[Message]:
        if not messages:
            return messages
        r = self.range
        first, last = _offset(messages[0]), _offset(messages[-1])
        if r.end > first > self.next_offset == r.start:
            log.warning(
                "Kafka %s-%d: offsets %d..%d were not available; read from %d",
                r.topic,
                r.partition,
                r.start,
                first - 1,
                first,
            )
        if last >= r.end:
            self.next_offset = r.end
            return messages[: bisect_left(messages, r.end, key=_offset)]
        self.next_offset = max(self.next_offset, last + 1)
        return messages

    def _on_error(self, error: KafkaError, message: Message) -> None:
        code = error.code()
        if code == KafkaError._PARTITION_EOF:
            # Compaction, transaction markers and aborted records leave gaps below the end.
            self.broker_end = int(message.offset() or 0)
            if self.broker_end >= self.range.end:
                self.next_offset = self.range.end
            return
        if code in _LOSS_CODES and self.options.fail_on_data_loss:
            raise DataLossError(
                data_loss_message([f"{self._where()}: offset {self.next_offset} is out of range"])
            )
        if error.fatal() or code in _LOSS_CODES:
            raise KafkaSourceError(self.options.scrub(f"Kafka error at {self._where()}: {error}"))
        log.warning("Kafka consumer error at %s (retrying): %s", self._where(), error.str())

    def _where(self) -> str:
        r = self.range
        return f"{r.topic}-{r.partition} [{r.start}, {r.end})"

    def _give_up(self) -> None:
        """Nothing arrived for pollTimeoutMs although the range is not complete."""
        seen = "" if self.broker_end is None else f"; the broker's end is {self.broker_end}"
        problem = f"{self._where()}: read up to {self.next_offset}{seen}"
        timeout = f"{self.options.poll_timeout_s:g} s (kafkaConsumer.pollTimeoutMs)"
        if self.broker_end is not None and self.broker_end < self.range.end:
            if self.options.fail_on_data_loss:
                raise DataLossError(data_loss_message([problem + f", still after {timeout}"]))
            log.warning("Kafka data loss (failOnDataLoss=false): %s", problem)
            return
        raise KafkaUnavailableError(
            self.options.scrub(
                f"Kafka read timed out: no data for {timeout} at {problem}. Check that brokers "
                f"{self.options.bootstrap_servers} are up and reachable from the executors."
            )
        )


def read_range(options: SourceOptions, offsets: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Arrow batches holding exactly offsets [start, end) of one partition (gaps excepted)."""
    return RangeReader(options, offsets).batches()
