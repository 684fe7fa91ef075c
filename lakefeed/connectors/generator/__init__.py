"""The built-in IoT generator source, format ``lakefeed_iot``: deterministic, replayable
readings with event time, lateness, duplicates and malformed rows, for demos, tests and
benchmarks. The Spark-free core is :mod:`lakefeed.connectors.generator.iot`.

Schema: ``offset long NOT NULL, ingest_time timestamp NOT NULL, device_id string, value string``
(``value`` is JSON; parse it with ``from_json(value, iot.PAYLOAD_DDL)``).

Options (names case-insensitive; unknown or invalid ones are refused at ``load()``):

- ``rowsPerSecond`` (1000): row i arrives at ``startTime + i / rowsPerSecond``.
- ``devices`` (100), ``seed`` (0).
- ``totalRows`` (unbounded): caps the stream; the row count of a batch read (required there).
- ``startTime`` (epoch ms or ISO-8601; default: the wall clock when the stream first starts,
  kept in the checkpoint). A start in the past makes a backlog: bound it with
  ``maxRowsPerTrigger``.
- ``backlogSeconds`` (0): without ``startTime``, start the stream this many seconds before the
  wall clock, so its first trigger (an ``availableNow`` run above all) finds
  ``backlogSeconds * rowsPerSecond`` rows waiting instead of none. Used at the first start only:
  the resulting start time is what the checkpoint keeps.
- ``maxRowsPerTrigger`` (none): admission control per micro-batch.
- ``numPartitions`` (2): Spark tasks per batch.
- ``outOfOrderSeconds`` (5), ``lateRate`` (0.01), ``maxLateSeconds`` (300),
  ``duplicateRate`` (0.02), ``malformedRate`` (0.02): the dirty data.

``trigger(availableNow=True)`` reads the rows that have arrived when the query starts. A restart
from a checkpoint with different content options (seed, rates, devices, rowsPerSecond,
startTime) is refused: the checkpoint's stream could not be replayed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakefeed.connectors.base import Connector

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> bool:
    """Register the ``lakefeed_iot`` data source on ``spark``."""
    # Imported here so the Spark-free core can be used without loading pyspark's data sources.
    from lakefeed.connectors.generator.source import IotDataSource

    spark.dataSource.register(IotDataSource)
    return True


def describe(options: Mapping[str, str]) -> str:
    """The generator as the UI names it, with its rate when one is set."""
    rate = next((v for k, v in options.items() if k.lower() == "rowspersecond"), None)
    return f"IoT generator ({rate} rows/s)" if rate else "IoT generator"


def _committed_input(options: Mapping[str, str], end: Any, first_end: Any) -> dict[str, str] | None:
    # pyspark: not for the declaration.
    from lakefeed.connectors.generator.source import committed_input

    return committed_input(options, end, first_end)


CONNECTOR = Connector(
    name="generator",
    formats=("lakefeed_iot",),
    aliases=("iot", "generator"),
    register=register,
    describe=describe,
    committed_input=_committed_input,
)
