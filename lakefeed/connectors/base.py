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
        sink=KafkaSink(),  # what lf.create_sink("alerts", "kafka", {...}) writes with
    )

This module imports nothing of Spark, so the event-log readers (UI, ``lakefeed status``) and the
Spark-free pipeline model can use it without a session.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
    from pyspark.sql.types import StructType

    from lakefeed.core.lakehouse import Lakehouse

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


@dataclass(frozen=True)
class Reached:
    """Whether the outside system of one source answers, as ``lakefeed validate
    --check-connections`` reports it (e.g. ``Reached("kafka h:9092", True, "brokers answer")``)."""

    target: str
    ok: bool
    detail: str


class ConnectorSink(ABC):
    """The sink side of a connector: how a pipeline sink in one of its formats
    (``lf.create_sink("alerts", "kafka", {...})``, DLT's and SDP's ``create_sink``) is checked,
    named and written.

    When each method runs tells what it may use: :meth:`check`, :meth:`keys`, :meth:`table` and
    :meth:`describe` run while the pipeline is loaded, without Spark; :meth:`frame_problems` when
    validation has the flow's DataFrame; :meth:`write_stream` when the runner starts the flow's
    query. Implementations import Spark and their client libraries inside those methods, so a
    connector's declaration stays cheap to import. ``options`` are the sink's as the user gave
    them (look them up in any case, through :class:`~lakefeed.core.options.Options`).

    Exactly-once is the product: :meth:`write_stream` commits each batch with the query's id
    and batch id where the target can keep them (Delta's ``txn``, a commit table), so a replayed
    batch changes nothing; a target that cannot (Kafka) is at-least-once, as Spark's writer is,
    and its module says so.
    """

    @abstractmethod
    def describe(self, options: Mapping[str, str]) -> str:
        """A human name without secrets, e.g. 'Kafka topic alerts'."""

    def check(self, options: Mapping[str, str]) -> None:
        """Refuse options it cannot write with: a LakefeedError naming the option and the fix."""
        return None  # takes any options unless it says otherwise

    def keys(self, options: Mapping[str, str]) -> list[str]:
        """The columns it upserts on (a batch's rows may replace earlier ones, so an aggregate's
        update mode fits); empty when it appends."""
        return []

    def table(self, options: Mapping[str, str]) -> str | None:
        """The table it writes by name in the lakehouse, if any (the pipeline's own flows must
        not write that one too)."""
        return None

    def delta_root(self, options: Mapping[str, str], lakehouse: Lakehouse) -> str | None:
        """The Delta table holding what it wrote, where the checkpoint guard can look (a flow
        whose checkpoint is lost beside a filled sink is refused, as a table's); None when the
        guard cannot see what the sink holds."""
        return None

    def frame_problems(self, options: Mapping[str, str], schema: StructType) -> None:
        """Refuse a flow whose columns it cannot take (a LakefeedError), before the query."""
        return None  # takes any columns unless it says otherwise

    @abstractmethod
    def write_stream(
        self, frame: DataFrame, options: Mapping[str, str], start: QueryStart, lakehouse: Lakehouse
    ) -> StreamingQuery:
        """Start the query writing ``frame`` into the sink as ``start`` says (``lakehouse``
        places what the options name by table name)."""


@dataclass(frozen=True)
class QueryStart:
    """What every streaming write is started with, whatever it writes: one record, so a sink
    takes it whole instead of each sink repeating its parts."""

    checkpoint: str
    output_mode: str
    query_name: str | None = None
    trigger: Mapping[str, Any] | None = None  # as for ``DataStreamWriter.trigger``

    def settings(self) -> dict[str, Any]:
        """The keywords of :func:`start_query` and of the adapters' ``write_stream``."""
        return {
            "output_mode": self.output_mode,
            "query_name": self.query_name,
            "trigger": self.trigger,
        }

    def start(self, writer: DataStreamWriter) -> StreamingQuery:
        return start_query(writer, self.checkpoint, **self.settings())


def start_query(
    writer: DataStreamWriter,
    checkpoint: str,
    *,
    output_mode: str,
    query_name: str | None = None,
    trigger: Mapping[str, Any] | None = None,
) -> StreamingQuery:
    """Start ``writer`` with the settings every streaming write shares (``trigger`` as for
    ``DataStreamWriter.trigger``; none given: Spark's default)."""
    writer = writer.outputMode(output_mode).option("checkpointLocation", checkpoint)
    if query_name is not None:
        writer = writer.queryName(query_name)
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


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
    """Session settings it needs, set once where the session is made (see
    ``lakefeed.connectors.registry.session_extension``)."""
    foreign_conf: Callable[[Mapping[str, str]], dict[str, str]] = dict
    """The session's settings without those naming the system it stands in for when that
    system is absent (delta-spark's extension and catalog): they would break the session."""
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
    check_connection: Callable[[Mapping[str, str]], Reached | None] | None = None
    """Whether a source's outside system answers (brokers, a table), from its options with
    ``path``, without starting a query (None back: nothing to check). Without it, a source with
    a path is checked as a folder."""
    sink: ConnectorSink | None = None
    """Its sink side; None when it only reads (a pipeline sink cannot use its formats)."""

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
        # pyspark: the connector record loads without it.
        from lakefeed.spark.jvm.bridge import READER_OPTION

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
