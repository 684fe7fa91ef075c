"""Auto Loader-style incremental file ingestion: ``spark.readStream.format("cloudFiles")``.

``register(spark)`` makes the ``cloudFiles`` format available, so Databricks code runs
unchanged; :func:`read_files` is the one-call form for pipeline flows.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from lakefeed.connectors.files.source import CloudFilesDataSource, skipped_files

__all__ = ["CloudFilesDataSource", "read_files", "register", "skipped_files"]


def register(spark: SparkSession) -> None:
    """Register the ``cloudFiles`` data source on ``spark``."""
    spark.dataSource.register(CloudFilesDataSource)


def read_files(
    path: str, format: str = "json", *, schema: StructType | str | None = None, **options: Any
) -> DataFrame:
    """A streaming DataFrame of the files landing under ``path``.

    ``options`` are ``cloudFiles.*`` and reader options (``header``, ``pathGlobFilter``, ...);
    keyword-friendly spellings with underscores are accepted too (``cloudFiles_maxFilesPerTrigger``
    is not needed: pass ``**{"cloudFiles.maxFilesPerTrigger": 10}``). Inside a pipeline flow,
    ``cloudFiles.schemaLocation`` defaults to the flow's schema folder. A given ``schema`` still
    gets the ``_metadata`` column (and ``_rescued_data`` with ``rescuedDataColumn``), unlike
    ``.schema()`` on a plain reader, whose columns Spark fixes exactly.
    """
    from lakefeed.pipeline.context import current_flow
    from lakefeed.session import active_spark

    opts = {k: str(v) for k, v in options.items()}
    opts["cloudFiles.format"] = format
    if not any(k.lower() == "cloudfiles.schemalocation" for k in opts):
        flow = current_flow()
        if flow is not None:
            opts["cloudFiles.schemaLocation"] = flow.schema_path
    if schema is not None:
        opts["lakefeed.schema"] = schema.json() if isinstance(schema, StructType) else schema
    return active_spark().readStream.format("cloudFiles").options(**opts).load(path)
