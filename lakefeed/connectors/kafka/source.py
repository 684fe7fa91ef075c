"""Spark adapters: the ``lakefeed_kafka`` data source (stream/batch reads; its writers are in
:mod:`~lakefeed.connectors.kafka.sink`).

Thin on purpose: options, offsets, planning, reading and producing live in Spark-free modules.
Spark constructs readers several times (driver, planner, executors) and pickles them, so
constructors only validate options; broker connections are opened lazily and never pickled.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lakefeed.connectors.kafka.client import BrokerView, DataLossError, data_loss_message
from lakefeed.connectors.kafka.consume import read_range, spark_ddl
from lakefeed.connectors.kafka.offsets import (
    EARLIEST,
    OffsetRange,
    TopicIds,
    Watermarks,
    at_times,
    from_json,
    initial_offsets,
    plan_end,
    plan_ranges,
    restart_recreated,
    times_for,
    to_json,
    topic_ids,
)
from lakefeed.connectors.kafka.options import (
    LATEST,
    KafkaOptionError,
    OffsetMap,
    SourceOptions,
    Timestamps,
    TopicPartition,
    parse_source_options,
)
from lakefeed.connectors.kafka.sink import KafkaBatchWriter, sink_options, stream_writer

NAME = "lakefeed_kafka"
"""Spark reserves ``kafka`` (even without its jar), so the format is ``lakefeed_kafka``."""

log = logging.getLogger("lakefeed.kafka.source")

_ID_CHECKS = 3
"""Reads of the watermarks while topic ids keep changing around them (a topic recreated)."""


class KafkaInputPartition(InputPartition):
    """One task's offset range (holds no client settings, so its repr is safe to log)."""

    def __init__(self, offsets: OffsetRange) -> None:
        super().__init__(offsets)


def _report_data_loss(options: SourceOptions, problems: tuple[str, ...]) -> None:
    if not problems:
        return
    if options.fail_on_data_loss:
        raise DataLossError(data_loss_message(problems))
    log.warning("Kafka data loss (failOnDataLoss=false): %s", "; ".join(problems))


def _offsets_at(
    options: SourceOptions,
    broker: BrokerView,
    times: Timestamps,
    partitions: list[TopicPartition],
    if_none: str,
) -> OffsetMap:
    try:
        wanted = times_for(times, partitions)
        return at_times(times, wanted, broker.offsets_for_times(wanted), if_none=if_none)
    except ValueError as exc:
        raise KafkaOptionError(options.scrub(str(exc))) from None


def _start_offsets(options: SourceOptions, broker: BrokerView) -> OffsetMap:
    """Where the read starts: symbolic earliest/latest, the user's offsets, or offsets at times."""
    starting = options.starting
    if isinstance(starting, Timestamps):
        return _offsets_at(
            options, broker, starting, broker.partitions(), options.timestamp_strategy
        )
    try:
        return initial_offsets(starting, broker.partitions(), options.subscription.kind == "assign")
    except ValueError as exc:
        raise KafkaOptionError(str(exc)) from None


def _tasks(
    options: SourceOptions, begin: OffsetMap, end: OffsetMap, low: OffsetMap
) -> list[InputPartition]:
    ranges = plan_ranges(
        begin,
        end,
        low,
        min_partitions=options.min_partitions,
        max_records=options.max_records_per_partition,
    )
    return [KafkaInputPartition(r) for r in ranges]


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition.value, OffsetRange):
        return iter(())
    return read_range(options, partition.value)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: offsets and planning. Executor side: :func:`read_range`."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.broker = BrokerView(options)
        self.latest: OffsetMap | None = None
        self.target: OffsetMap | None = None
        self.topic_ids: TopicIds = {}

    def initialOffset(self) -> dict:
        start = _start_offsets(self.options, self.broker)
        return to_json(start, self.broker.topic_ids(topic for topic, _ in start))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def _watermarks(self) -> Watermarks:
        """Watermarks, and the ids of the topics they belong to (``self.topic_ids``): ids read
        before and after, again while a topic was recreated in between."""
        partitions = self.broker.partitions()
        topics = {topic for topic, _ in partitions}
        self.topic_ids = self.broker.topic_ids(topics)
        for _ in range(_ID_CHECKS):
            watermarks = self.broker.watermarks(partitions)
            before, self.topic_ids = self.topic_ids, self.broker.topic_ids(topics)
            if before == self.topic_ids:
                break
        self.latest = {tp: high for tp, (_, high) in watermarks.items()}
        return watermarks

    def prepareForTriggerAvailableNow(self) -> None:
        self._watermarks()
        self.target = self.latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        watermarks = self._watermarks()
        begin, recreated = restart_recreated(start, self.topic_ids)
        _report_data_loss(self.options, recreated)
        plan = plan_end(
            begin,
            watermarks,
            max_offsets=limit.max_rows if isinstance(limit, ReadMaxRows) else None,
            target=self.target,
            unconfirmed=self.broker.unconfirmed,
        )
        _report_data_loss(self.options, plan.data_loss)
        for reason in plan.deferred:
            log.warning("Kafka %s", reason)
        return to_json(plan.end, self.topic_ids)

    def reportLatestOffset(self) -> dict | None:
        return to_json(self.latest) if self.latest else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, _ = restart_recreated(start, topic_ids(end))  # as latestOffset decided
        stop = from_json(end)
        symbolic = [tp for tp in stop if begin.get(tp, EARLIEST) == EARLIEST]
        low = {tp: wm[0] for tp, wm in self.broker.watermarks(symbolic, exact_high=False).items()}
        return _tasks(self.options, begin, stop, low)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def stop(self) -> None:
        self.broker.close()


class KafkaBatchReader(DataSourceReader):
    """``spark.read``: [startingOffsets, endingOffsets) resolved once, at planning."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        broker = BrokerView(self.options)
        try:
            start = _start_offsets(self.options, broker)
            watermarks = broker.watermarks(list(start))
            end = self._end_offsets(broker, watermarks)
        finally:
            broker.close()
        plan = plan_end(start, watermarks)
        _report_data_loss(self.options, plan.data_loss)
        low = {tp: wm[0] for tp, wm in watermarks.items()}
        begin = {
            tp: max(offset, low[tp]) if offset >= 0 else offset for tp, offset in start.items()
        }
        return _tasks(self.options, begin, end, low)

    def _end_offsets(self, broker: BrokerView, watermarks: Watermarks) -> OffsetMap:
        highs = {tp: high for tp, (_, high) in watermarks.items()}
        ending = self.options.ending
        if ending == "latest":
            return highs
        if isinstance(ending, Timestamps):  # Spark: no offset at or after the time → latest
            ending = _offsets_at(self.options, broker, ending, list(highs), "latest")
        assert isinstance(ending, dict)
        missing = sorted(set(highs) - set(ending))
        if missing:
            raise KafkaOptionError(
                "endingOffsets JSON must give every partition read (-1 for latest); missing: "
                + ", ".join(f"{t}-{p}" for t, p in missing)
            )
        beyond = [
            f"{t}-{p}={ending[(t, p)]} > {highs[(t, p)]}"
            for t, p in sorted(highs)
            if ending[(t, p)] > highs[(t, p)]
        ]
        if beyond:
            raise KafkaOptionError(
                "endingOffsets beyond the latest available offsets: " + ", ".join(beyond)
            )
        return {tp: highs[tp] if ending[tp] == LATEST else ending[tp] for tp in highs}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class KafkaDataSource(DataSource):
    """Spark's Kafka connector options and schema, on librdkafka (no jars)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        # Validates every option before the query starts (load() fails, not the stream).
        return spark_ddl(parse_source_options(self.options, batch=None).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(parse_source_options(self.options, batch=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(parse_source_options(self.options, batch=False))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise KafkaOptionError("a Kafka topic cannot be overwritten; use mode('append')")
        return KafkaBatchWriter(sink_options(self.options, schema, stream=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        # Complete mode (overwrite) re-sends the whole result each batch, as Spark's sink does.
        return stream_writer(sink_options(self.options, schema))
