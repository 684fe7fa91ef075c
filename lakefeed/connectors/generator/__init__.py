"""The built-in IoT generator source, format ``lakefeed_iot``: deterministic, replayable
readings with event time, lateness, duplicates and malformed rows, for demos, tests and
benchmarks. The Spark-free core is :mod:`lakefeed.connectors.generator.iot`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the ``lakefeed_iot`` data source on ``spark``."""
    # Imported here so the Spark-free core can be used without loading pyspark's data sources.
    from lakefeed.connectors.generator.source import IotDataSource

    spark.dataSource.register(IotDataSource)
