"""Feed a Kafka topic from the built-in IoT generator at a chosen rate (Spark-free).

Behind ``lakefeed kafka produce``, so the Kafka examples and benchmarks run end to end without
an external producer. Row ``i`` of the generator is sent when it "arrives" (``startTime + i /
rowsPerSecond``), keyed by device id, with the arrival time as the Kafka timestamp; the same
seed always produces the same messages.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from lakefeed.connectors.generator.iot import IotConfig, available_rows, iter_batches
from lakefeed.connectors.kafka.client import LIBRDKAFKA_LOG
from lakefeed.connectors.kafka.options import scrub
from lakefeed.connectors.kafka.produce import KafkaSinkError

_CHUNK = 20_000
"""Most rows generated and sent per step: bounds memory and keeps progress reports lively."""


def _admin(client: Mapping[str, Any]) -> AdminClient:
    settings: dict[str, Any] = {**client, "logger": LIBRDKAFKA_LOG}
    return AdminClient(settings)


def ensure_topic(config: Mapping[str, Any], topic: str, partitions: int, timeout: float) -> bool:
    """Create ``topic`` with ``partitions`` unless it exists; True when it was created."""
    admin = _admin(config)
    try:
        if topic in admin.list_topics(timeout=timeout).topics:
            return False
        for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            future.result(timeout=timeout)
    except KafkaException as exc:
        raise KafkaSinkError(scrub(f"cannot create topic {topic}: {exc}", config)) from None
    return True


class Feeder:
    """Sends generator rows [0, total) to a topic, paced by the generator's arrival times."""

    def __init__(self, client: Mapping[str, Any], topic: str, config: IotConfig) -> None:
        self.client = dict(client)
        self.topic = topic
        self.config = config.resolved()
        self.sent = 0
        self.errors: list[str] = []
        self.producer = Producer(
            {"linger.ms": 20, **self.client, "enable.idempotence": True, "logger": LIBRDKAFKA_LOG}
        )

    def _on_delivery(self, error: Any, _message: Any) -> None:
        if error is not None and len(self.errors) < 10:
            self.errors.append(str(error))

    def send_until(self, end: int) -> None:
        for batch in iter_batches(self.config, self.sent, end, batch_rows=_CHUNK):
            devices = batch.column("device_id").to_pylist()
            values = batch.column("value").to_pylist()
            stamps = batch.column("ingest_time").cast("int64").to_pylist()
            for device, value, stamp in zip(devices, values, stamps, strict=True):
                self._produce(device, value, stamp // 1000)
            self.sent += batch.num_rows
            self.producer.poll(0)
        if self.errors:
            raise KafkaSinkError(scrub(f"delivery failed: {self.errors[0]}", self.client))

    def _produce(self, key: str | None, value: str | None, timestamp_ms: int) -> None:
        while True:
            try:
                self.producer.produce(
                    self.topic,
                    value=value,
                    key=key,
                    timestamp=timestamp_ms,
                    on_delivery=self._on_delivery,
                )
                return
            except BufferError:
                self.producer.poll(0.05)

    def run(
        self,
        stop: threading.Event | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> int:
        """Send until ``totalRows`` (or ``stop``); return how many messages were acknowledged."""
        stop = stop or threading.Event()
        total = self.config.total_rows
        while not stop.is_set() and (total is None or self.sent < total):
            ready = min(available_rows(self.config), self.sent + _CHUNK)
            if ready > self.sent:
                self.send_until(ready)
                if on_progress is not None:
                    on_progress(self.sent)
            else:
                stop.wait(0.01)
        return self.finish()

    def finish(self, timeout: float = 60.0) -> int:
        remaining = self.producer.flush(timeout)
        if self.errors or remaining:
            raise KafkaSinkError(
                scrub(
                    f"{remaining} message(s) unacknowledged; first error: "
                    f"{self.errors[0] if self.errors else 'timeout'}",
                    self.client,
                )
            )
        return self.sent


def wait_ready(client: Mapping[str, Any], timeout: float) -> None:
    """Fail within ``timeout`` seconds when the brokers cannot be reached."""
    admin = _admin(client)
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KafkaSinkError(
            scrub(f"Kafka brokers {client.get('bootstrap.servers')} unreachable: {exc}", client)
        ) from None
