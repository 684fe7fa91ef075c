"""The connectors lakefeed ships, and the lookups the pipeline, runtime, UI and CLI use.

Callers ask here ("which connector serves this format?", "what does this source's progress
say?") instead of comparing format names themselves. The connector packages are imported on
first use and pyspark only by the session functions, so importing this module costs nothing (the
UI and ``lakefeed status`` read it without Spark). Sessions get the connectors through
:func:`session_extension` (the Spark layer knows nothing of them).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from lakefeed.connectors.base import Connector, ConnectorEvent, ConnectorSink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakefeed.spark.session import SessionExtension


@functools.cache
def connectors() -> tuple[Connector, ...]:
    """Every connector, in registration order."""
    # Connector packages (postgres's loads pyspark) on first use: no cycle with spark.session.
    from lakefeed.connectors import delta, files, generator, kafka, postgres

    return (
        delta.CONNECTOR,
        kafka.CONNECTOR,
        files.CONNECTOR,
        generator.CONNECTOR,
        postgres.CONNECTOR,
    )


def without_foreign_conf(settings: Mapping[str, str]) -> dict[str, str]:
    """A new session's settings without any a connector's absent counterpart would need (see
    :attr:`Connector.foreign_conf`)."""
    kept = dict(settings)
    for connector in connectors():
        kept = connector.foreign_conf(kept)
    return kept


def register(spark: SparkSession) -> list[Connector]:
    """Register every lakefeed data source on ``spark``; the connectors serving their formats
    there (not Delta when delta-spark does)."""
    return [c for c in connectors() if c.register(spark)]


@functools.cache
def session_extension() -> SessionExtension:
    """What a session needs to serve lakefeed's formats: the connectors' settings, without the
    foreign ones, and their data sources registered once it exists."""
    from lakefeed.spark.session import SessionExtension  # pyspark: see module docstring

    return SessionExtension(conf=session_conf(), strip=without_foreign_conf, ready=register)


def active_spark() -> SparkSession:
    """:func:`lakefeed.spark.session.active_spark`; a fresh session serves the connectors."""
    from lakefeed.spark.session import active_spark  # pyspark: see module docstring

    return active_spark(session_extension())


def find(name: str) -> Connector | None:
    """The connector serving format or alias ``name`` (any case), or None (a Spark format)."""
    return next((c for c in connectors() if c.serves(name)), None)


def source_format(kind: str) -> str:
    """The Spark format ``lakefeed.source(kind)`` reads: a connector's, else ``kind`` itself."""
    connector = find(kind)
    return connector.format if connector is not None else kind


def sink_for(fmt: str) -> ConnectorSink | None:
    """The sink side of the connector serving format or alias ``fmt``, or None: a Spark format
    (written by Spark's writer), or a connector that only reads (see :func:`find`)."""
    connector = find(fmt)
    return connector.sink if connector is not None else None


def sink_names() -> list[str]:
    """The connectors a pipeline sink can name as its format, e.g. for a message's fix."""
    return [c.name for c in connectors() if c.sink is not None]


def session_conf() -> dict[str, str]:
    """The session settings every connector needs together."""
    return {k: v for c in connectors() for k, v in c.session_conf.items()}


def describe(fmt: str, options: Mapping[str, str]) -> str:
    """A human name for a source, e.g. 'Kafka topics orders' (another Spark format: its name
    and path)."""
    connector = find(fmt)
    if connector is not None:
        return connector.describe(options)
    path = options.get("path")
    return f"{fmt} {path}" if path else fmt


def batch_events(
    flow: str, sources: list[tuple[str, Mapping[str, str]]]
) -> Iterator[ConnectorEvent]:
    """The events a batch of ``flow`` produced at its sources (format, options)."""
    for fmt, options in sources:
        connector = find(fmt)
        if connector is not None:
            yield from connector.batch_events(flow, options)


def progress_figures(source_progress: Mapping[str, Any]) -> dict[str, int]:
    """Figures every connector finds in one ``sources[]`` entry of a query progress."""
    figures: dict[str, int] = {}
    for connector in connectors():
        figures.update(connector.progress_figures(source_progress))
    return figures
