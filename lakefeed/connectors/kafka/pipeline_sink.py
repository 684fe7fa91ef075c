"""Kafka as a pipeline sink (``lf.create_sink("alerts", "kafka", {...})``): Spark's Kafka sink
options and columns, written by the ``lakefeed_kafka`` writer.

At-least-once by default, as Spark's own Kafka sink: a batch replayed after a crash is produced
again. With ``lakefeed.deliveryGuarantee=exactly-once`` each batch is one Kafka transaction with
a marker on a control topic (:mod:`~lakefeed.connectors.kafka.transact`), and a replay is
skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakefeed.connectors.base import ConnectorSink, QueryStart
from lakefeed.core.errors import ConfigError, LakefeedError
from lakefeed.core.options import Options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

    from lakefeed.core.lakehouse import Lakehouse


class KafkaSink(ConnectorSink):
    """Produces each row of a batch as a record (columns ``value``, ``key``, ``topic``, ...)."""

    def describe(self, options: Mapping[str, str]) -> str:
        return f"Kafka topic {Options(options).get('topic') or '(from the topic column)'}"

    def check(self, options: Mapping[str, str]) -> None:
        # pyarrow: the connector's declaration imports this module.
        from lakefeed.connectors.kafka.options import parse_sink_options

        try:
            parse_sink_options(options)
        except LakefeedError as error:
            raise ConfigError(
                error.message,
                fix=error.fix or 'e.g. {"kafka.bootstrap.servers": "host:9092", "topic": "out"}',
            ) from None

    def frame_problems(self, options: Mapping[str, str], schema: StructType) -> None:
        from lakefeed.connectors.kafka.sink import sink_options  # pyspark, librdkafka: as above

        sink_options(options, schema)

    def write_stream(
        self, frame: DataFrame, options: Mapping[str, str], start: QueryStart, lakehouse: Lakehouse
    ) -> StreamingQuery:
        # Load order: the package imports this module first.
        from lakefeed.connectors.kafka import NAME

        return start.start(frame.writeStream.format(NAME).options(**options))
