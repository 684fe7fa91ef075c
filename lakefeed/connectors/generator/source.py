"""``lakefeed_iot``: the generator as a Spark data source (batch and streaming).

Thin adapters over :mod:`lakefeed.connectors.generator.iot`. An offset is
``{"offset": n, "startTime": ms, "config": {content options}}``: the start time and the options
that decide row contents travel in the checkpoint, so a restarted query replays exactly the
rows it planned before a crash, and a restart with different content options is refused instead
of silently mixing two different streams in one table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from lakefeed.connectors.generator.iot import (
    NAME,
    GeneratorOptionError,
    IotConfig,
    available_rows,
    iter_batches,
    wall_clock_ms,
)

SCHEMA = StructType(
    [
        StructField("offset", LongType(), nullable=False),
        StructField("ingest_time", TimestampType(), nullable=False),
        StructField("device_id", StringType()),
        StructField("value", StringType()),
    ]
)


class RowRange(InputPartition):
    """Rows ``[start, end)`` of the stream ``config`` (with its start time resolved)."""

    def __init__(self, config: IotConfig, start: int, end: int) -> None:
        super().__init__((start, end))
        self.config, self.start, self.end = config, start, end


def split(config: IotConfig, start: int, end: int) -> list[RowRange]:
    """``[start, end)`` in ``numPartitions`` contiguous, non-empty ranges."""
    parts = min(config.num_partitions, end - start)
    bounds = [start + (end - start) * k // parts for k in range(parts + 1)] if parts else []
    return [RowRange(config, lo, hi) for lo, hi in pairwise(bounds)]


def read_range(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, RowRange)
    yield from iter_batches(partition.config, partition.start, partition.end)


class IotDataSource(DataSource):
    """Format ``lakefeed_iot``: deterministic IoT readings with dirty data on purpose."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Parse now: bad options fail at load(), before any query starts.
        self.config = IotConfig.from_options(options)

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema)
        return IotBatchReader(self.config)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema)
        return IotStreamReader(self.config)


def _check_schema(schema: StructType) -> None:
    if schema != SCHEMA:
        raise GeneratorOptionError(
            f"the {NAME} source has a fixed schema ({SCHEMA.simpleString()}); "
            "remove .schema(...) from the reader and parse `value` downstream"
        )


class IotBatchReader(DataSourceReader):
    """The first ``totalRows`` rows, whether or not they would have arrived yet."""

    def __init__(self, config: IotConfig) -> None:
        if config.total_rows is None:
            raise GeneratorOptionError(
                f"a batch read of {NAME} needs option totalRows (the row count to generate); "
                "use readStream for an unbounded stream"
            )
        # Resolved once on the driver: every partition sees the same start time.
        self.config = config.resolved()

    def partitions(self) -> Sequence[InputPartition]:
        return split(self.config, 0, self.config.total_rows or 0)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition)


class IotStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Rows admitted as they "arrive" at ``rowsPerSecond``, replayable from any offset."""

    def __init__(self, config: IotConfig) -> None:
        self.config = config
        self._frozen_now_ms: int | None = None
        self._stream: IotConfig | None = None  # with the checkpoint's start time, once known

    def initialOffset(self) -> dict[str, Any]:
        stream = self.config.resolved()
        return _offset(stream, 0)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.config.max_rows_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.config.max_rows_per_trigger)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        stream = self._adopt(start)
        begin = int(start["offset"])
        end = max(begin, available_rows(stream, self._now_ms()))
        if isinstance(limit, ReadMaxRows):
            end = min(end, begin + limit.max_rows)
        return _offset(stream, end)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        if self._stream is None:
            return None
        return _offset(self._stream, available_rows(self._stream, self._now_ms()))

    def prepareForTriggerAvailableNow(self) -> None:
        # Freeze the clock, not an offset: the start time is only known from the checkpoint.
        self._frozen_now_ms = wall_clock_ms()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        stream = self._adopt(end)
        return split(stream, int(start["offset"]), int(end["offset"]))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition)

    def _now_ms(self) -> int:
        return self._frozen_now_ms if self._frozen_now_ms is not None else wall_clock_ms()

    def _adopt(self, offset: dict[str, Any]) -> IotConfig:
        """The stream an offset from the checkpoint describes; refuses changed options."""
        try:
            start_time, content = int(offset["startTime"]), offset["config"]
            recorded = {option: content[option] for option in self.config.content_options()}
        except (KeyError, TypeError, ValueError):
            raise GeneratorOptionError(
                f"the checkpoint holds offset {offset!r}, which the {NAME} source did not "
                "write: use a new checkpointLocation for this query"
            ) from None
        _refuse_changes(self.config, recorded, start_time)
        self._stream = self.config.with_content(recorded, start_time)
        return self._stream


def _offset(stream: IotConfig, end: int) -> dict[str, Any]:
    return {"offset": end, "startTime": stream.start_time_ms, "config": stream.content_options()}


def committed_input(
    options: Mapping[str, str], end: Any, first_end: Any = None
) -> dict[str, str] | None:
    """Batch options that read exactly the rows a stream committed up to its offset ``end``:
    rows ``[0, end)`` of the checkpoint's stream (its start time; the content options are those
    of ``options``, as a restart refuses others). None: ``end`` is not this source's offset."""
    if not isinstance(end, dict) or not {"offset", "startTime", "config"} <= end.keys():
        return None
    content = IotConfig.from_options(options).content_options()
    if any(end["config"].get(option) != value for option, value in content.items()):
        return None
    return {"startTime": str(int(end["startTime"])), "totalRows": str(int(end["offset"]))}


def _refuse_changes(config: IotConfig, recorded: dict[str, Any], start_time: int) -> None:
    """A restart must generate the same stream it checkpointed: compare what users set."""
    changed = [
        f"{option}={value!r} (checkpoint: {recorded[option]!r})"
        for option, value in config.content_options().items()
        if value != recorded[option]
    ]
    if config.start_time_ms is not None and config.start_time_ms != start_time:
        changed.append(f"startTime={config.start_time_ms} (checkpoint: {start_time})")
    if changed:
        raise GeneratorOptionError(
            f"the {NAME} options differ from the ones this checkpoint was started with: "
            + ", ".join(changed)
            + ". Restore them, or use a new checkpointLocation (and a new target) to start "
            "a different stream"
        )
