"""Auto Loader-style incremental file ingestion: ``spark.readStream.format("cloudFiles")``.

``register(spark)`` makes the ``cloudFiles`` format available, so Databricks code runs
unchanged; :func:`read_files` is the one-call form for pipeline flows.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from lakefeed.connectors.files.source import CloudFilesDataSource, claim_skipped, skipped_files

__all__ = ["CloudFilesDataSource", "claim_skipped", "read_files", "register", "skipped_files"]


def register(spark: SparkSession) -> None:
    """Register the ``cloudFiles`` data source on ``spark``."""
    from lakefeed.connectors.files.source import planned_stream
    from lakefeed.jvm import readers

    spark.dataSource.register(CloudFilesDataSource)
    readers.route("cloudFiles", planned_stream)


def read_files(
    path: str, format: str = "json", *, schema: StructType | str | None = None, **options: Any
) -> DataFrame:
    """A streaming DataFrame of the files landing under ``path``.

    ``options`` are ``cloudFiles.*`` and reader options (``header=True``, ``pathGlobFilter``, ...;
    dotted names as ``**{"cloudFiles.maxFilesPerTrigger": 10}``). Inside a pipeline flow,
    ``cloudFiles.schemaLocation`` defaults to the flow's schema folder and the run mode decides
    stream or batch (backfill reads every file present). A given ``schema`` still
    gets the ``_metadata`` column (and ``_rescued_data`` with ``rescuedDataColumn``), unlike
    ``.schema()`` on a plain reader, whose columns Spark fixes exactly.
    """
    from lakefeed.connectors.options import Options
    from lakefeed.pipeline.context import current_flow

    opts = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}
    opts["cloudFiles.format"] = format
    if schema is not None:
        opts["lakefeed.schema"] = schema.json() if isinstance(schema, StructType) else schema
    flow = current_flow()
    if flow is not None:
        if "cloudFiles.schemaLocation" not in Options(opts):
            opts["cloudFiles.schemaLocation"] = flow.schema_path
        # Inside a pipeline flow the runtime decides stream vs batch (backfill) reads.
        from lakefeed.pipeline.api import source

        return source("files", path, **opts)
    from lakefeed.session import active_spark

    return active_spark().readStream.format("cloudFiles").options(**opts).load(path)
