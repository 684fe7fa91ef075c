"""lakefeed's Delta Lake connector: ``format("delta")`` for Spark without delta-spark jars.

``register(spark)`` (called by ``lakefeed.spark_session()``) registers the data source unless
the real delta-spark is on the classpath, enables filter pushdown for Python data sources (file
skipping needs it), and installs :mod:`~lakefeed.connectors.delta.compat` so ``partitionBy()``
and the default save mode work as with delta-spark. Table housekeeping without Spark lives in
:mod:`lakefeed.connectors.delta.table`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the Spark-free helpers below this package import without pyspark
    from pyspark.sql import SparkSession

NATIVE_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def native_delta_available(spark: SparkSession) -> bool:
    """True when delta-spark's classes are loadable: then its connector serves ``delta``."""
    from lakefeed.jvm import loadable

    if getattr(spark, "_jvm", None) is None:
        return NATIVE_EXTENSION in (spark.conf.get("spark.sql.extensions", "") or "")
    return loadable(spark, NATIVE_EXTENSION)


def register(spark: SparkSession) -> None:
    """Register ``delta`` on ``spark`` (idempotent)."""
    if native_delta_available(spark):
        return
    from lakefeed.connectors.delta import compat
    from lakefeed.connectors.delta.datasource import (
        DeltaDataSource,
        planned_read,
        planned_stream,
    )
    from lakefeed.jvm import readers

    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(DeltaDataSource)
    compat.install()
    readers.route("delta", planned_stream)
    readers.route("delta", planned_read, batch=True)
