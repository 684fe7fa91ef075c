"""What a lakefeed connector is, so the pipeline, runtime, UI and CLI ask instead of knowing.

Each connector package (``delta``, ``files``, ``kafka``, ``generator``) declares one
:class:`Connector` as ``CONNECTOR`` in its ``__init__``; :mod:`lakefeed.connectors.registry`
lists them. Everything a caller outside the package needs goes through these fields: the
Spark format names (and the friendly names ``lakefeed.source(kind)`` accepts), how the formats
are registered on a session, the session settings they need, the defaults a pipeline flow
gives their options, the events a batch of theirs produces, the figures their progress carries,
and how the UI names a source of theirs. A connector that has no such thing leaves the field
at its default.

Example::

    CONNECTOR = Connector(
        name="kafka",
        formats=("lakefeed_kafka",),
        aliases=("kafka",),
        register=register,
        describe=lambda options: "Kafka topics " + options["subscribe"],
        progress_figures=kafka_figures,  # {"kafka_lag": 42} from one source's progress
    )

This module imports nothing of Spark, so the event-log readers (UI, ``lakefeed status``) can use
it without a session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CommittedInput = Callable[[Mapping[str, str], Any, Any], "dict[str, str] | None"]
"""(a stream's options, its end offset of the last committed batch, its first batch's end) ->
options bounding a batch read to exactly that input, or None when the offset is not its own."""

Planned = Callable[["SparkSession", Mapping[str, str], Any], "DataFrame | None"]
"""(session, options with ``path``, the schema the user fixed or None) -> a DataFrame read by
Spark's own readers, or None when the format's Python data source reads it."""


@dataclass(frozen=True)
class ConnectorEvent:
    """One event-log event a connector reports after a batch of a flow (e.g. a skipped file)."""

    kind: str
    message: str
    level: str = "INFO"
    details: Mapping[str, Any] = field(default_factory=dict)


def _no_defaults(schema_path: str, options: Mapping[str, str]) -> dict[str, str]:
    return {}


def _no_events(flow: str, options: Mapping[str, str]) -> Iterable[ConnectorEvent]:
    return ()


def _no_figures(source_progress: Mapping[str, Any]) -> dict[str, int]:
    return {}


@dataclass(frozen=True)
class Connector:
    """One connector: its names, its lifecycle hooks and what it tells the rest of lakefeed."""

    name: str
    """Short name, e.g. ``kafka``."""
    formats: tuple[str, ...]
    """Spark format names it serves; the first is the one its sources are read with."""
    register: Callable[[SparkSession], bool]
    """Registers its formats on a session (idempotent); ``spark_session()`` calls it. False
    when another connector serves them there (delta-spark's ``delta``)."""
    describe: Callable[[Mapping[str, str]], str]
    """A human name for a source of this connector from its options (``path`` among them), e.g.
    'Kafka topics a, b', for the UI's graph."""
    aliases: tuple[str, ...] = ()
    """Other names ``lakefeed.source(kind)`` accepts for it (any case)."""
    session_conf: Mapping[str, str] = field(default_factory=dict)
    """Session settings it needs, set once where the session is made (see ``lakefeed.session``)."""
    pipeline_defaults: Callable[[str, Mapping[str, str]], dict[str, str]] = _no_defaults
    """Options a pipeline flow adds unless given: (the flow's schema folder, options) -> options."""
    batch_events: Callable[[str, Mapping[str, str]], Iterable[ConnectorEvent]] = _no_events
    """Events after a batch of a flow reading this source: (flow, options) -> events."""
    progress_figures: Callable[[Mapping[str, Any]], dict[str, int]] = _no_figures
    """Figures from one ``sources[]`` entry of a query progress, e.g. ``{"kafka_lag": 42}``."""
    planned_stream: Planned | None = None
    """``readStream.format(...).load()`` read by Spark's own readers, when it can be."""
    planned_read: Planned | None = None
    """``read.format(...).load()`` read by Spark's own readers, when it can be."""
    committed_input: CommittedInput | None = None
    """How ``lakefeed verify`` bounds a batch read to what a stream's checkpoint committed."""

    def serves(self, name: str) -> bool:
        """Whether ``name`` (any case) is one of its formats or aliases."""
        wanted = name.lower()
        return any(wanted == n.lower() for n in (*self.formats, *self.aliases))

    @property
    def format(self) -> str:
        """The Spark format its sources are read with."""
        return self.formats[0]

    def read(
        self,
        spark: SparkSession,
        path: str | None,
        options: Mapping[str, str],
        *,
        streaming: bool,
        schema: Any = None,
    ) -> DataFrame:
        """A source of this connector as lakefeed reads it, without any patched pyspark method:
        Spark's own readers where the connector plans them, else its Python data source."""
        from lakefeed.jvm.bridge import READER_OPTION

        planned = self.planned_stream if streaming else self.planned_read
        every = {**options, "path": path} if path is not None else dict(options)
        frame = planned(spark, every, schema) if planned is not None else None
        if frame is not None:
            return frame
        reader = (spark.readStream if streaming else spark.read).format(self.format)
        reader = reader.options(**options)
        if planned is not None:
            reader = reader.option(READER_OPTION, "python")  # decided above, not again
        if schema is not None:
            reader = reader.schema(schema)
        return reader.load(path) if path is not None else reader.load()
