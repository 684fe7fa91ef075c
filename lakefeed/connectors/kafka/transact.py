"""The exactly-once Kafka sink's core: one Kafka transaction per micro-batch (Spark-free).

Tasks do not produce: each returns its rows as Arrow IPC bytes, and the driver's commit produces
every row of the batch in ONE transaction together with a marker (transactional id → batch id)
in a small compacted control topic. Kafka then holds "these rows" and "batch N is done"
atomically, so the commit is idempotent:

- crash before the Kafka commit: the open transaction is aborted when the restarted query's
  producer calls ``init_transactions`` with the same transactional id (which also fences a
  zombie driver); read_committed consumers never see its rows, and the batch is produced again;
- crash after the Kafka commit but before Spark's commit log: the replayed batch finds its
  marker (read with ``isolation.level=read_committed``) and is skipped.

A marker also carries, in its header ``lakefeed.sourceOffsets``, the hash of the batch's source
offsets (``offsets/N``): a replay has the same, while a batch id the marker names over other
offsets, or an older one, comes from a checkpoint behind the topic (restored from a backup, or
its last ``offsets/N`` + ``commits/N`` deleted) and is refused before anything is produced
(``CHECKPOINT_BEHIND_TABLE``), not skipped with its rows. Markers of older versions (no header)
are judged by the batch id alone, as before.

The transactional id is the user's prefix + the query id in ``<checkpoint>/metadata``: stable
across restarts of one query, different for a new checkpoint (whose batch ids start again at 0).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from lakefeed.connectors.kafka.client import LIBRDKAFKA_LOG
from lakefeed.connectors.kafka.errors import ControlTopicBlockedError
from lakefeed.connectors.kafka.options import SinkOptions
from lakefeed.connectors.kafka.produce import BatchProducer, KafkaSinkError
from lakefeed.core.errors import DataLossRiskError
from lakefeed.delta.errors import CHECKPOINT_BEHIND
from lakefeed.spark import offset_log

log = logging.getLogger("lakefeed.kafka.sink")

_SINK_COLUMNS = ("value", "key", "topic", "partition", "headers")
_TIMEOUT_S = 30.0
_POLL_S = 0.5
OFFSETS_HEADER = "lakefeed.sourceOffsets"
"""The marker header holding the batch's source offsets hash (:func:`offset_log.fingerprint`)."""


@dataclass(frozen=True)
class Marker:
    """The newest committed marker of one transactional id."""

    batch_id: int
    offsets: str | None  # None: a marker of an older lakefeed, or of a writer without checkpoint


def rows_to_ipc(batches: Iterable[pa.RecordBatch]) -> tuple[bytes, int]:
    """A task's rows (only the columns the sink produces) as Arrow IPC stream bytes, and their
    count: what travels to the driver in the task's commit message."""
    sink = pa.BufferOutputStream()
    writer: pa.ipc.RecordBatchStreamWriter | None = None
    rows = 0
    for batch in batches:
        keep = [i for i, name in enumerate(batch.schema.names) if name.lower() in _SINK_COLUMNS]
        batch = pa.RecordBatch.from_arrays(
            [batch.column(i) for i in keep], names=[batch.schema.names[i] for i in keep]
        )
        if writer is None:
            writer = pa.ipc.new_stream(sink, batch.schema)
        writer.write_batch(batch)
        rows += batch.num_rows
    if writer is None:
        return b"", 0
    writer.close()
    return sink.getvalue().to_pybytes(), rows


def _batches(payloads: Sequence[bytes]) -> Iterable[pa.RecordBatch]:
    for payload in payloads:
        if payload:
            yield from pa.ipc.open_stream(payload)


def transactional_id(options: SinkOptions, query_id: str) -> str:
    return f"{options.transactional_id_prefix}{query_id}"


def ensure_control_topic(options: SinkOptions) -> None:
    """Create the compacted one-partition marker topic unless it exists."""
    admin = AdminClient({**options.client, "logger": LIBRDKAFKA_LOG})  # type: ignore[dict-item]
    topic = options.control_topic
    try:
        if topic in admin.list_topics(timeout=_TIMEOUT_S).topics:
            return
        futures = admin.create_topics(
            [NewTopic(topic, 1, -1, config={"cleanup.policy": "compact"})],
            request_timeout=_TIMEOUT_S,
        )
        futures[topic].result(timeout=_TIMEOUT_S)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise KafkaSinkError(
            options.scrub(f"could not create the control topic {topic}: {exc}"),
            fix="create it (1 partition, cleanup.policy=compact) or set lakefeed.controlTopic",
        ) from None


def committed_marker(options: SinkOptions, txn_id: str) -> Marker | None:
    """The newest committed marker under ``txn_id`` (the last batch committed), or None.

    Call it after ``init_transactions`` for ``txn_id``: every transaction of ours has then
    ended, so each of our markers lies below the control partition's high watermark.
    """
    consumer = Consumer(
        {
            **options.client,
            "group.id": f"lakefeed-sink-markers-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            # The sink's kafka.* settings include producer ones, each a CONFWARN per batch here.
            "log_level": 3,
            "logger": LIBRDKAFKA_LOG,
        }
    )
    try:
        consumer.assign([TopicPartition(options.control_topic, 0, 0)])
        return MarkerScan(consumer, txn_id.encode(), options).run()
    finally:
        consumer.close()


class MarkerScan:
    """Reads the control partition ``read_committed`` up to the high watermark of its first
    fetch, keeping the newest marker of one key.

    A ``read_committed`` reader stops at the last stable offset: the first offset of the oldest
    transaction still open on the partition (Apache Kafka). A marker we committed *behind*
    another producer's open transaction is invisible until that transaction ends; reading "to
    the end" as the reader sees it would miss it and produce a replayed batch twice. So the scan
    ends only where the reader's end (the EOF offset) reaches the high watermark seen at the
    start, i.e. once every transaction below it has ended, and refuses after
    ``lakefeed.controlTopicWaitMs`` instead of guessing.
    """

    def __init__(self, consumer: Consumer, key: bytes, options: SinkOptions) -> None:
        self.consumer = consumer
        self.key = key
        self.options = options
        self.found: Marker | None = None
        self.target: int | None = None  # the high watermark of the first fetch
        self.stable: int | None = None  # where the reader last stopped (last stable offset)

    def run(self) -> Marker | None:
        deadline = time.monotonic() + self.options.control_wait_s
        while True:
            message = self.consumer.poll(min(_POLL_S, max(deadline - time.monotonic(), 0.01)))
            if message is not None and self._done(message):
                return self.found
            if time.monotonic() > deadline:
                raise self._blocked()

    def _done(self, message: Message) -> bool:
        error = message.error()
        if error is None:
            value = message.value() or b""
            if message.key() == self.key and value.isdigit():  # anything else is not ours
                self.found = Marker(int(value), _header(message, OFFSETS_HEADER))
            return False
        if error.code() != KafkaError._PARTITION_EOF:
            raise KafkaSinkError(
                self.options.scrub(f"reading {self.options.control_topic}: {error.str()}")
            )
        self.stable = int(message.offset() or 0)
        if self.target is None:
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(self.options.control_topic, 0), cached=True
            )
            self.target = high
        return self.stable >= self.target

    def _blocked(self) -> KafkaSinkError:
        topic, wait = self.options.control_topic, self.options.control_wait_s
        if self.target is None:
            return KafkaSinkError(
                f"no answer reading the control topic {topic} within {wait:g} s; the batch "
                "fails and is retried"
            )
        return ControlTopicBlockedError(
            f"the exactly-once sink cannot tell whether this batch was committed already: on "
            f"its control topic {topic}, another producer's transaction has been open since "
            f"offset {self.stable} (its committed markers end there, the topic at "
            f"{self.target}) for all of {wait:g} s. Nothing was produced",
            fix="rerun once that transaction ended (Kafka aborts it after its "
            "transaction.timeout.ms); a sink that shares the control topic with a slow or hung "
            "writer can get its own lakefeed.controlTopic, or wait longer with "
            "lakefeed.controlTopicWaitMs",
        )


def _header(message: Message, name: str) -> str | None:
    given = message.headers() or []
    for key, value in given.items() if isinstance(given, dict) else given:
        if key == name and value is not None:
            return value.decode() if isinstance(value, bytes) else value
    return None


def commit_batch(
    options: SinkOptions,
    txn_id: str,
    batch_id: int,
    payloads: Sequence[bytes],
    offsets: str | None = None,
) -> int:
    """Produce a micro-batch's rows and its marker in one transaction; the rows sent (0 when
    the batch had been committed already). ``offsets``: the batch's source offsets hash
    (:func:`offset_log.fingerprint`), recorded with the marker and compared at a replay."""
    ensure_control_topic(options)
    sender = BatchProducer(options, **{"transactional.id": txn_id})
    producer = sender.producer
    try:
        # Fences any older producer with this id and aborts its open transaction.
        producer.init_transactions(_TIMEOUT_S)
        last = committed_marker(options, txn_id)
        if last is not None and last.batch_id >= batch_id:
            _refuse_if_behind(options, batch_id, offsets, last)
            log.info(
                "Kafka sink batch %d was committed already (marker %d): skipped",
                batch_id,
                last.batch_id,
            )
            return 0
        producer.begin_transaction()
        for batch in _batches(payloads):
            sender.send_batch(batch)
        headers: dict[str, str | bytes | None] = {OFFSETS_HEADER: offsets} if offsets else {}
        producer.produce(
            options.control_topic,
            key=txn_id.encode(),
            value=str(batch_id).encode(),
            headers=headers,
        )
        sent = sender.finish()
        producer.commit_transaction(_TIMEOUT_S)
        return sent
    except KafkaException as exc:
        _abort(producer)
        raise KafkaSinkError(
            options.scrub(f"Kafka transaction for batch {batch_id} failed: {exc}; it is retried")
        ) from None
    except BaseException:
        _abort(producer)
        raise


def _refuse_if_behind(
    options: SinkOptions, batch_id: int, offsets: str | None, last: Marker
) -> None:
    """Refuse skipping a batch the markers hold under other source offsets (or an older one):
    the checkpoint is behind the topic, and the batch's rows would never be produced."""
    what = offset_log.replay_conflict(batch_id, offsets, last.batch_id, lambda: last.offsets)
    if what is None:
        return
    raise DataLossRiskError(
        f"the checkpoint is behind its Kafka sink: it runs batch {batch_id}, but the control "
        f"topic {options.control_topic} {what}; the batch would be skipped as already "
        "produced and its rows would never reach the topic (a checkpoint restored from an "
        "older backup, or its last offsets/commits files deleted). Nothing was produced",
        fix="put back the checkpoint that goes with the topic as it is now (the newest "
        "backup, or the one taken with it); or, to send the rows again, start the sink over "
        "with a new, empty checkpoint (readers of the topic then see the rows it already "
        "holds a second time): for a pipeline sink, `lakefeed run PIPELINE --full-refresh "
        "<sink>`",
        code=CHECKPOINT_BEHIND,
    )


def _abort(producer: Producer) -> None:
    try:
        producer.abort_transaction(_TIMEOUT_S)
    except KafkaException as exc:  # nothing open, or fenced: the next init aborts it anyway
        log.debug("abort_transaction: %s", exc)


def fence(options: SinkOptions, txn_id: str) -> None:
    """Abort whatever transaction ``txn_id`` left open (``init_transactions`` does it)."""
    sender = BatchProducer(options, **{"transactional.id": txn_id})
    try:
        sender.producer.init_transactions(_TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaSinkError(
            options.scrub(f"could not abort the Kafka transaction: {exc}")
        ) from None
