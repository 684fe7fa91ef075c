"""The Python half of ``PlannedSource``: a lakefeed stream reader answering over Py4J.

A reader that can express a batch as a DataFrame of Spark's own readers implements
:class:`SparkBatches`; :func:`planned_stream` then gives a streaming DataFrame whose offsets
and planning are that reader's, unchanged, and whose rows Spark reads itself.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
)
from pyspark.sql.types import StructType

from lakefeed.connectors.options import Options
from lakefeed.jvm import PROVIDER, loadable

PLANNER_OPTION = "lakefeed.planner"
READER_OPTION = "lakefeed.reader"
"""``spark``: Spark's own reader reads a stream's files; ``python``: the Python data source."""


class SparkBatches(Protocol):
    """A Python ``DataSourceStreamReader`` whose batches Spark can read without Python."""

    def initialOffset(self) -> dict: ...

    def getDefaultReadLimit(self) -> ReadLimit: ...

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict: ...

    def reportLatestOffset(self) -> dict | None: ...

    def prepareForTriggerAvailableNow(self) -> None: ...

    def commit(self, end: dict) -> None: ...

    def stop(self) -> None: ...

    def spark_batch(self, spark: SparkSession, start: dict, end: dict) -> DataFrame | None:
        """The rows of (start, end] read by Spark's own readers; None when there are none."""
        ...


def available(spark: SparkSession) -> bool:
    """True when ``PlannedSource`` is on this session's classpath and Py4J reaches Python
    (not under Spark Connect, which has no callbacks into this process)."""
    return loadable(spark, PROVIDER)


def reader_choice(options: Mapping[str, str], default: str) -> str:
    """``spark`` or ``python``: option ``lakefeed.reader`` (any case) in ``options``, checked."""
    return Options(options).choice(READER_OPTION, ("spark", "python"), default)


def spark_reads(spark: SparkSession, options: Mapping[str, str], default: str) -> bool:
    """Whether a stream with these options is read by Spark (when it can be)."""
    return reader_choice(options, default) == "spark" and available(spark)


def planned_stream(
    spark: SparkSession,
    open_reader: Callable[[], SparkBatches],
    schema: StructType,
    description: str,
) -> DataFrame:
    """A streaming DataFrame planned by readers ``open_reader`` makes (one per query);
    ``description`` names the source in the query's progress."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = spark.sparkContext._gateway
    assert gateway is not None
    ensure_callback_server_started(gateway)
    planned = PlannedStream(spark, open_reader, description)
    _planners(gateway).register(planned.id, planned)
    return (
        spark.readStream.format(PROVIDER).schema(schema).option(PLANNER_OPTION, planned.id).load()
    )


def _planners(gateway: Any) -> Any:
    return gateway.jvm.dev.lakefeed.spark.Planners


def _limit(text: str) -> ReadLimit:
    kind, _, value = text.partition(":")
    if kind == "files":
        return ReadMaxFiles(int(value))
    if kind == "bytes":
        return ReadMaxBytes(int(value))
    if kind == "rows":
        return ReadMaxRows(int(value))
    if kind == "all":
        return ReadAllAvailable()
    raise ValueError(f"a planned stream cannot honour the read limit {text}")


def _text(limit: ReadLimit) -> str:
    if isinstance(limit, ReadMaxFiles):
        return f"files:{limit.max_files}"
    if isinstance(limit, ReadMaxBytes):
        return f"bytes:{limit.max_bytes}"
    if isinstance(limit, ReadMaxRows):
        return f"rows:{limit.max_rows}"
    return "all"


class PlannedStream:
    """Implements the Java ``StreamPlannerFactory``: a fresh reader for each query."""

    class Java:
        implements = ["dev.lakefeed.spark.StreamPlannerFactory"]

    def __init__(
        self, spark: SparkSession, open_reader: Callable[[], SparkBatches], description: str
    ) -> None:
        self.id = uuid.uuid4().hex
        self.spark = spark
        self.open_reader = open_reader
        self.description = description

    def open(self) -> Planner:
        return Planner(self.spark, self.open_reader(), self.description)


class Planner:
    """Implements the Java ``StreamPlanner`` by asking the reader; offsets cross as JSON."""

    class Java:
        implements = ["dev.lakefeed.spark.StreamPlanner"]

    def __init__(self, spark: SparkSession, reader: SparkBatches, description: str) -> None:
        self.spark = spark
        self.reader = reader
        self._description = description

    def description(self) -> str:
        return self._description

    def _start(self, start: str | None) -> dict:
        return json.loads(start) if start is not None else self.reader.initialOffset()

    def initialOffset(self) -> str:
        return json.dumps(self.reader.initialOffset())

    def defaultReadLimit(self) -> str:
        return _text(self.reader.getDefaultReadLimit())

    def latestOffset(self, start: str | None, limit: str) -> str:
        return json.dumps(self.reader.latestOffset(self._start(start), _limit(limit)))

    def reportLatestOffset(self) -> str | None:
        latest = self.reader.reportLatestOffset()
        return None if latest is None else json.dumps(latest)

    def prepareForTriggerAvailableNow(self) -> None:
        self.reader.prepareForTriggerAvailableNow()

    def batch(self, start: str | None, end: str) -> Any:
        frame = self.reader.spark_batch(self.spark, self._start(start), json.loads(end))
        return None if frame is None else frame._jdf

    def commit(self, end: str) -> None:
        self.reader.commit(json.loads(end))

    def stop(self) -> None:
        self.reader.stop()
