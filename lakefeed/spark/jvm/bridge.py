"""The Python half of ``PlannedSource`` and ``PlannedRelation``: lakefeed readers answering
over Py4J.

A reader that can express a batch as a DataFrame of Spark's own readers implements
:class:`SparkBatches`; :func:`planned_stream` then gives a streaming DataFrame whose offsets
and planning are that reader's, unchanged, and whose rows Spark reads itself.

The DataFrame's plan carries how to open its reader (pickled, as Spark carries a Python data
source), so a ``load()`` leaves nothing behind in either process: DataFrames derived from it,
frames never started (``validate``) and restarts of a stopped query need no registration that
something would have to release. Each query opens its own planner through its session's one
:class:`PlannedStreams`, and drops it when the query stops. :func:`planned_read` does the same
for a batch read: Spark asks for its DataFrame whenever it plans a query reading it, so a
stream–static join reads the static side as it is at each micro-batch.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pyspark import cloudpickle
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
)
from pyspark.sql.types import StructType

from lakefeed.core.config import READER
from lakefeed.core.options import Options
from lakefeed.spark.jvm import PROVIDER, loadable

PLANNER_OPTION = "lakefeed.planner"
"""The id of the session's :class:`PlannedStreams` (Java ``Planners``)."""
OPENER_OPTION = "lakefeed.planner.reader"
"""The pickled ``(open_reader, description)`` a query of the stream opens its planner with."""
DESCRIPTION_OPTION = "lakefeed.planner.description"
"""What the scan of a planned batch read shows in plans, e.g. ``DeltaTable[/data/devices]``."""
READER_OPTION = READER.key
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
    """A streaming DataFrame planned by readers ``open_reader`` makes (one per query; it must
    pickle, as a Python data source does); ``description`` names the source in the query's
    progress."""

    opener = base64.b64encode(cloudpickle.dumps((open_reader, description))).decode("ascii")
    return (
        spark.readStream.format(PROVIDER)
        .schema(schema)
        .option(PLANNER_OPTION, _session_streams(spark).id)
        .option(OPENER_OPTION, opener)
        .load()
    )


def planned_read(
    spark: SparkSession,
    open_frame: Callable[[SparkSession], DataFrame],
    schema: StructType,
    description: str,
) -> DataFrame:
    """A batch DataFrame whose rows are ``open_frame(spark)`` as it is each time a query reading
    it is planned: once for a batch query, again for every micro-batch of a stream that joins it
    (``open_frame`` must pickle and return ``schema``'s columns); ``description`` names its scan
    in plans."""

    opener = base64.b64encode(cloudpickle.dumps(open_frame)).decode("ascii")
    return (
        spark.read.format(PROVIDER)
        .schema(schema)
        .option(PLANNER_OPTION, _session_streams(spark).id)
        .option(OPENER_OPTION, opener)
        .option(DESCRIPTION_OPTION, description)
        .load()
    )


_streams: dict[SparkSession, PlannedStreams] = {}  # the JVM holds each as long, too
_streams_lock = threading.Lock()


def _session_streams(spark: SparkSession) -> PlannedStreams:
    """The session's :class:`PlannedStreams`, registered in the driver JVM on first use."""

    with _streams_lock:
        streams = _streams.get(spark)
        if streams is None:
            gateway = spark.sparkContext._gateway
            assert gateway is not None
            ensure_callback_server_started(gateway)
            streams = _streams[spark] = PlannedStreams(spark)
            _planners(gateway).register(streams.id, streams)
        return streams


def registered(spark: SparkSession) -> int:
    """Planner factories the driver JVM holds: one per session, however many streams."""
    return int(_planners(spark.sparkContext._gateway).size())


def open_planners(spark: SparkSession) -> int:
    """Planners of queries that have not stopped yet."""
    return int(_planners(spark.sparkContext._gateway).open())


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


class PlannedStreams:
    """Implements the Java ``StreamPlannerFactory`` for one session: opens each query's planner
    from the opener its plan carries, and plans batch reads when a query reading them is."""

    class Java:
        implements = ["dev.lakefeed.spark.StreamPlannerFactory"]

    def __init__(self, spark: SparkSession) -> None:
        self.id = uuid.uuid4().hex
        self.spark = spark

    def open(self, opener: str) -> Planner:

        open_reader, description = cloudpickle.loads(base64.b64decode(opener))
        return Planner(self.spark, open_reader(), description)

    def read(self, opener: str) -> Any:

        open_frame = cloudpickle.loads(base64.b64decode(opener))
        return open_frame(self.spark)._jdf


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
