"""Auto Loader-style incremental file ingestion: ``spark.readStream.format("cloudFiles")``.

``register(spark)`` makes the ``cloudFiles`` format available, so Databricks code runs
unchanged; :func:`read_files` is the one-call form for pipeline flows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from lakefeed.connectors.base import Connector, ConnectorEvent
from lakefeed.connectors.files.source import (
    CloudFilesDataSource,
    claim_skipped,
    planned_stream,
    reader_choice,
    skipped_files,
)
from lakefeed.connectors.registry import active_spark
from lakefeed.core.flow_context import current_flow, read_source
from lakefeed.core.options import Options

__all__ = [
    "CONNECTOR",
    "CloudFilesDataSource",
    "claim_skipped",
    "read_files",
    "read_stream",
    "register",
    "skipped_files",
]

SCHEMA_LOCATION = "cloudFiles.schemaLocation"


def register(spark: SparkSession) -> bool:
    """Register the ``cloudFiles`` data source on ``spark``."""
    spark.dataSource.register(CloudFilesDataSource)
    return True


def read_stream(
    spark: SparkSession, path: str, schema: StructType | str | None = None, **options: str
) -> DataFrame:
    """``spark.readStream.format("cloudFiles").load(path)`` as lakefeed's runtime calls it: the
    stream planned in Python and read by Spark's readers unless it needs lakefeed's Python
    reader (or ``lakefeed.reader=python`` asks for it). Needs no patched pyspark method."""
    return CONNECTOR.read(spark, path, options, streaming=True, schema=schema)


def _describe(options: Mapping[str, str]) -> str:
    """The landing folder and, once the stream is made, which reader parses its files and why
    (shown in the ``flow_start`` event and ``lakefeed status``)."""
    where = f"landing folder {options.get('path', '?')}"
    choice = reader_choice(options)
    return where if choice is None else f"{where}, read by {choice}"


def _pipeline_defaults(schema_path: str, options: Mapping[str, str]) -> dict[str, str]:
    """A flow's file source keeps its schema under the flow's schema folder unless told."""
    if SCHEMA_LOCATION in Options(options):
        return {}
    return {SCHEMA_LOCATION: schema_path}


def _skipped_events(flow: str, options: Mapping[str, str]) -> Iterator[ConnectorEvent]:
    """One ``file_skipped`` event per file newly skipped (each record is claimed once)."""
    for record in claim_skipped(options, "event_log"):
        yield ConnectorEvent(
            "file_skipped",
            f"{flow}: skipped unreadable file {record['path']}: {record['error'][:300]}",
            level="WARN",
            details=record,
        )


def _committed_input(options: Mapping[str, str], end: Any, first_end: Any) -> dict[str, str] | None:
    # pyarrow: not for the declaration.
    from lakefeed.connectors.files.filelog import committed_input

    return committed_input(options, end, first_end)


CONNECTOR = Connector(
    name="files",
    formats=("cloudFiles",),
    aliases=("files",),
    register=register,
    describe=_describe,
    pipeline_defaults=_pipeline_defaults,
    batch_events=_skipped_events,
    planned_stream=planned_stream,
    committed_input=_committed_input,
)


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
    opts = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}
    opts["cloudFiles.format"] = format
    if schema is not None:
        opts["lakefeed.schema"] = schema.json() if isinstance(schema, StructType) else schema
    if current_flow() is not None:
        # Inside a pipeline flow the runtime decides stream vs batch (backfill) reads and gives
        # the schema location its default (see _pipeline_defaults).
        return read_source(CONNECTOR.format, path, opts)
    return read_stream(active_spark(), path, **opts)
