"""The Kafka sink's core: Arrow batches → Kafka with an idempotent producer (Spark-free).

Contract (the same as Spark's Kafka sink): **at-least-once**. Within one task, the idempotent
producer keeps retries from duplicating or reordering messages, and the task only succeeds once
every message is acknowledged by all in-sync replicas (``acks=all``); any delivery error fails
the task, so nothing is silently dropped. A task or micro-batch that fails after some messages
were acknowledged is run again and sends them again: consumers that need exactly-once must
deduplicate (e.g. on a key or an id in the value), or read into a Delta table with a merge.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer

from lakefeed.connectors.kafka.client import LIBRDKAFKA_LOG
from lakefeed.connectors.kafka.errors import KafkaSinkError
from lakefeed.connectors.kafka.options import KafkaOptionError, SinkOptions

log = logging.getLogger("lakefeed.kafka.sink")

_TEXT_OR_BYTES = ("string", "binary")
_COLUMN_TYPES: dict[str, tuple[str, ...]] = {
    "key": _TEXT_OR_BYTES,
    "value": _TEXT_OR_BYTES,
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
}


def check_sink_columns(columns: dict[str, str], options: SinkOptions) -> None:
    """Refuse a DataFrame the sink cannot write, before the query starts.

    ``columns`` maps lower-case column names to Spark simple type strings. Other columns are
    ignored, as Spark's Kafka sink does.
    """
    if "value" not in columns:
        raise KafkaOptionError(
            "the Kafka sink needs a value column (string or binary), e.g. "
            "df.selectExpr('CAST(id AS STRING) AS key', 'to_json(struct(*)) AS value')"
        )
    if options.topic is None and "topic" not in columns:
        raise KafkaOptionError(
            'the Kafka sink needs option topic or a topic column, e.g. .option("topic", "out")'
        )
    for name, allowed in _COLUMN_TYPES.items():
        actual = columns.get(name)
        if actual is not None and actual.replace(" ", "") not in allowed:
            raise KafkaOptionError(
                f"Kafka sink column {name} is {actual}; it must be {' or '.join(allowed)}"
            )


def producer_config(options: SinkOptions, **owned: Any) -> dict[str, Any]:
    return {
        "linger.ms": 5,
        **options.client,
        **owned,
        # Retries inside one task must never duplicate or reorder: not user-overridable.
        "enable.idempotence": True,
        "acks": "all",
        "logger": LIBRDKAFKA_LOG,
    }


class BatchProducer:
    """Sends rows, remembers the first delivery error, and fails unless all are acknowledged."""

    def __init__(self, options: SinkOptions, **owned: Any) -> None:
        self.options = options
        try:
            self.producer = Producer(producer_config(options, **owned))
        except (KafkaException, ValueError, TypeError) as exc:
            raise KafkaOptionError(options.scrub(f"invalid Kafka producer option: {exc}")) from None
        self.failed = 0
        self.first_error: KafkaError | None = None
        self.sent = 0

    def _on_delivery(self, error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            self.failed += 1
            self.first_error = self.first_error or error

    def send_batch(self, batch: pa.RecordBatch) -> None:
        names = [name.lower() for name in batch.schema.names]
        data = {name: batch.column(i).to_pylist() for i, name in enumerate(names)}
        rows = batch.num_rows
        values = data["value"]
        keys = data.get("key") or [None] * rows
        topics = [self.options.topic] * rows if self.options.topic else data["topic"]
        partitions = data.get("partition") or [None] * rows
        headers = data.get("headers") or [None] * rows
        for i in range(rows):
            if topics[i] is None:
                raise KafkaSinkError("a row has a null topic; filter it out or set option topic")
            self._produce(
                topics[i],
                values[i],
                keys[i],
                partitions[i],
                [(h["key"], h["value"]) for h in headers[i]] if headers[i] else None,
            )
        self.producer.poll(0)
        self._raise_if_failed()

    def _produce(self, topic: str, value: Any, key: Any, partition: Any, headers: Any) -> None:
        kwargs: dict[str, Any] = {"on_delivery": self._on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                self.producer.produce(topic, value=value, key=key, **kwargs)
                self.sent += 1
                return
            except BufferError:
                # Local queue full: let deliveries drain (bounded by the flush timeout later).
                self.producer.poll(0.1)
                self._raise_if_failed()
            except KafkaException as exc:  # refused locally, e.g. message too large
                raise KafkaSinkError(
                    self.options.scrub(f"Kafka refused a message for topic {topic}: {exc}")
                ) from None

    def finish(self) -> int:
        """Wait for every acknowledgement; the number of messages sent."""
        remaining = self.producer.flush(self.options.flush_timeout_s)
        self._raise_if_failed()
        if remaining:
            raise KafkaSinkError(
                f"{remaining} of {self.sent} Kafka messages were not acknowledged within "
                f"{self.options.flush_timeout_s:g} s (producer.flushTimeoutMs); the batch fails "
                "and will be sent again"
            )
        return self.sent

    def _raise_if_failed(self) -> None:
        if self.first_error is not None:
            raise KafkaSinkError(
                self.options.scrub(
                    f"{self.failed} Kafka message(s) could not be delivered: "
                    f"{self.first_error.str()}; the batch fails and will be sent again"
                )
            )


def write_batches(options: SinkOptions, batches: Iterable[pa.RecordBatch]) -> int:
    """Send every row of ``batches``; return the count once all are acknowledged."""
    producer = BatchProducer(options)
    for batch in batches:
        producer.send_batch(batch)
    return producer.finish()
