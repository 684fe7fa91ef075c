"""lakefeed's Delta Lake connector: ``format("delta")`` for Spark without delta-spark jars.

``register(spark)`` (called by ``lakefeed.spark_session()``) registers the data source unless
the real delta-spark is on the classpath. lakefeed's own code reads and writes tables with the
explicit functions of :mod:`~lakefeed.connectors.delta.adapters` (``read_stream``, ``read``,
``write_stream``, ``write``); Databricks-style ``format("delta")`` code reaches the same
functions through :mod:`lakefeed.compat.patches`. Session settings (made where the session
is made, see :data:`CONNECTOR`): filter pushdown for Python data sources (file skipping needs
it) and INT64 Parquet timestamps (what Delta readers expect). Table housekeeping without Spark
lives in :mod:`lakefeed.delta.table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakefeed.connectors.base import Connector, Reached
from lakefeed.connectors.delta.pipeline_sink import DeltaSink
from lakefeed.core.options import Options
from lakefeed.spark.jvm import loadable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NATIVE_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
NATIVE_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
EXTENSIONS_CONF = "spark.sql.extensions"
CATALOG_CONF = "spark.sql.catalog.spark_catalog"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def native_delta_available(spark: SparkSession) -> bool:
    """True when delta-spark's classes are loadable: then its connector serves ``delta``."""
    if getattr(spark, "_jvm", None) is None:
        return NATIVE_EXTENSION in (spark.conf.get("spark.sql.extensions", "") or "")
    return loadable(spark, NATIVE_EXTENSION)


def without_delta_spark(settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` without delta-spark's SQL extension and catalog, unless delta-spark's jar is
    asked for (``spark.jars.packages`` / ``spark.jars``).

    delta-spark's documented session setup names both; with no delta-spark on the classpath
    (none supports Spark 4.3) the catalog fails the session's first query and the extension logs
    a ClassNotFoundException. lakefeed serves Delta there, so the docs' code runs as written.
    """
    kept = dict(settings)
    jars = f"{kept.get('spark.jars.packages', '')},{kept.get('spark.jars', '')}"
    if "delta-spark" in jars or "delta-core" in jars:
        return kept
    if kept.get(CATALOG_CONF) == NATIVE_CATALOG:
        del kept[CATALOG_CONF]
    if EXTENSIONS_CONF in kept:
        others = [e for e in kept.pop(EXTENSIONS_CONF).split(",") if e.strip() != NATIVE_EXTENSION]
        if any(e.strip() for e in others):
            kept[EXTENSIONS_CONF] = ",".join(others)
    return kept


def register(spark: SparkSession) -> bool:
    """Register ``delta`` on ``spark`` (idempotent); False when delta-spark serves it. A session
    made elsewhere with delta-spark's catalog (see :func:`without_delta_spark`) loses it."""
    if native_delta_available(spark):
        return False
    if spark.conf.get(CATALOG_CONF, None) == NATIVE_CATALOG:
        spark.conf.unset(CATALOG_CONF)
    # pyspark, delta-rs: not for the declaration.
    from lakefeed.connectors.delta.datasource import DeltaDataSource

    spark.dataSource.register(DeltaDataSource)
    return True


def _planned_stream(
    spark: SparkSession, options: Mapping[str, str], schema: Any
) -> DataFrame | None:
    # pyspark, delta-rs: not for the declaration.
    from lakefeed.connectors.delta.datasource import planned_stream

    return planned_stream(spark, options, schema)


def _planned_read(spark: SparkSession, options: Mapping[str, str], schema: Any) -> DataFrame | None:
    # pyspark, delta-rs: not for the declaration.
    from lakefeed.connectors.delta.datasource import planned_read

    return planned_read(spark, options, schema)


def _committed_input(options: Mapping[str, str], end: Any, first_end: Any) -> dict[str, str] | None:
    # delta-rs: not for the declaration.
    from lakefeed.connectors.delta.offsets import committed_input

    return committed_input(options, end, first_end)


def _reachable(options: Mapping[str, str]) -> Reached | None:
    """Whether a Delta source's table (option ``path``) exists, for ``validate
    --check-connections``; None without a path (nothing to check)."""
    path = Options(options).get("path")
    if path is None:
        return None
    from lakefeed.delta.table import presence  # deltalake: the declaration loads without it

    found, detail = presence(path)
    return Reached(f"delta {path}", found, detail)


CONNECTOR = Connector(
    name="delta",
    formats=("delta",),
    register=register,
    describe=lambda options: f"Delta table {options.get('path', '?')}",
    foreign_conf=without_delta_spark,
    session_conf={
        PUSHDOWN_CONF: "true",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    },
    planned_stream=_planned_stream,
    planned_read=_planned_read,
    committed_input=_committed_input,
    check_connection=_reachable,
    sink=DeltaSink(),
)


def __getattr__(name: str) -> Any:
    """``delta.read_stream`` / ``read`` / ``write_stream`` / ``write``, imported on first use
    (they need pyspark and delta-rs; the connector's declaration does not)."""
    if name in ("read_stream", "read", "write_stream", "write", "DeltaTableExistsError"):
        from lakefeed.connectors.delta import adapters  # pyspark, delta-rs: on first use

        return getattr(adapters, name)
    raise AttributeError(name)
