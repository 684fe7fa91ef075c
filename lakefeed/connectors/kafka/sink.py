"""Spark adapters for writing Kafka: the ``lakefeed_kafka`` stream and batch writers.

Each task produces its rows with :mod:`~lakefeed.connectors.kafka.produce` (idempotent producer,
at-least-once); options are parsed and the columns checked on the driver, before any task runs.
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

from lakefeed.connectors.kafka.options import SinkOptions, parse_sink_options
from lakefeed.connectors.kafka.produce import check_sink_columns, write_batches

log = logging.getLogger("lakefeed.kafka.sink")


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    sent: int


def sink_options(options: Any, schema: StructType) -> SinkOptions:
    parsed = parse_sink_options(options)
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


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write``: append-only, at-least-once."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return KafkaCommitMessage(write_batches(self.options, iterator))
