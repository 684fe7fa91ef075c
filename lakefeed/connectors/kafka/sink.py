"""Spark adapters for writing Kafka: the ``lakefeed_kafka`` stream and batch writers.

By default each task produces its rows with :mod:`~lakefeed.connectors.kafka.produce`
(idempotent producer, at-least-once). With ``lakefeed.deliveryGuarantee=exactly-once`` tasks
only hand their rows to the driver, whose commit produces the batch in one transaction
(:mod:`~lakefeed.connectors.kafka.transact`). Options are parsed and the columns checked on the
driver, before any task runs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from lakefeed.connectors.kafka import transact
from lakefeed.connectors.kafka.options import KafkaOptionError, SinkOptions, parse_sink_options
from lakefeed.connectors.kafka.produce import check_sink_columns, write_batches
from lakefeed.spark import offset_log

log = logging.getLogger("lakefeed.kafka.sink")


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    sent: int


@dataclass
class KafkaRowsMessage(WriterCommitMessage):
    """An exactly-once task's rows (Arrow IPC stream bytes), produced by the driver."""

    rows: bytes
    count: int


def sink_options(options: Any, schema: StructType, *, stream: bool = True) -> SinkOptions:
    """Parsed options, refusing what the first batch would fail on (``stream`` False for
    ``df.write``, which has no micro-batches to make exactly-once)."""
    parsed = parse_sink_options(options)
    if parsed.exactly_once and not stream:
        raise KafkaOptionError(
            "lakefeed.deliveryGuarantee=exactly-once is for streaming writes (one transaction "
            "per micro-batch); df.write to Kafka is at least once: drop the option, or write "
            "with writeStream and trigger(availableNow=True)"
        )
    check_sink_columns(
        {field.name.lower(): field.dataType.simpleString() for field in schema.fields}, parsed
    )
    return parsed


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """At-least-once streaming sink (see :mod:`lakefeed.connectors.kafka.produce`)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return KafkaCommitMessage(write_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = sum(m.sent for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("Kafka sink batch %d: %d messages acknowledged", batchId, sent)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("Kafka sink batch %d failed; it will be sent again (at-least-once)", batchId)


class TransactionalStreamWriter(DataSourceStreamArrowWriter):
    """Exactly-once streaming sink: tasks return their rows, the driver's commit produces the
    whole micro-batch in one Kafka transaction (see :mod:`lakefeed.connectors.kafka.transact`)."""

    def __init__(self, options: SinkOptions) -> None:
        assert options.checkpoint is not None  # stream_writer refuses a query without one
        self.options = options
        self.checkpoint = options.checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaRowsMessage:
        return KafkaRowsMessage(*transact.rows_to_ipc(iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows = [m.rows for m in messages if isinstance(m, KafkaRowsMessage)]
        offsets = offset_log.fingerprint(self.checkpoint, batchId)
        sent = transact.commit_batch(self.options, self._transactional_id(), batchId, rows, offsets)
        log.info("Kafka sink batch %d: %d messages committed in one transaction", batchId, sent)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        transact.fence(self.options, self._transactional_id())
        log.warning("Kafka sink batch %d failed; its transaction is aborted", batchId)

    def _transactional_id(self) -> str:
        return transact.transactional_id(self.options, offset_log.running_query_id(self.checkpoint))


def stream_writer(options: SinkOptions) -> DataSourceStreamArrowWriter:
    """The writer for ``lakefeed.deliveryGuarantee``; an exactly-once one needs a checkpoint."""
    if options.exactly_once:
        if not options.checkpoint:
            raise KafkaOptionError(
                "lakefeed.deliveryGuarantee=exactly-once needs the query's own checkpoint (its "
                "query id names the Kafka transactions): set .option('checkpointLocation', ...)"
            )
        return TransactionalStreamWriter(options)
    return KafkaStreamWriter(options)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``: append-only, at-least-once."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return KafkaCommitMessage(write_batches(self.options, iterator))
