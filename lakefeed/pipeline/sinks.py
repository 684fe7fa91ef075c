"""Sinks: where a pipeline's flows write outside its lakehouse (DLT/SDP's ``create_sink`` and
``foreach_batch_sink``), declared and checked without Spark.

A sink is a dataset of kind ``sink``: nothing of it is in the lakehouse but the checkpoints of
the append flows writing it (``checkpoints/<flow>``), and no flow can read it. Its format is one
a connector with a sink side (:class:`~lakefeed.connectors.base.ConnectorSink`: ``kafka``,
``delta``, ``postgres``; the registry says which), any other format Spark can write (its options
passed to Spark's writer as they are), or a Python function called per micro-batch
(:data:`FOREACH_BATCH`). Misuse is found here, by the connector's own checks, and phrased with
its code and fix; what needs a flow's columns or a session is checked by
:mod:`lakefeed.runtime.sinks`.

While a ``foreach_batch_sink`` function runs, :func:`current_batch` says which flow, query and
batch it is writing, so the function can make its writes idempotent (e.g. a Delta MERGE's
``withTransaction(app_id, batch_id)``, or the PostgreSQL sink's ``write_batch``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakefeed.connectors.base import ConnectorSink
from lakefeed.connectors.registry import find, sink_for, sink_names
from lakefeed.core.errors import ConfigError, LakefeedError, PipelineDefinitionError, registered
from lakefeed.core.options import Options
from lakefeed.core.redact import redact, redact_text
from lakefeed.core.scoped import bound
from lakefeed.pipeline.errors import SINK_FLOW, SINK_FORMAT, SINK_OPTION, SINK_READ
from lakefeed.pipeline.output_modes import ModeChoice, PlanFacts, choose_output_mode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakefeed.core.lakehouse import Lakehouse

FOREACH_BATCH = "foreach_batch"
"""The format of a ``foreach_batch_sink``: its function writes each micro-batch."""
SPARK = "spark"
"""The kind of a sink in any other format: Spark's own writer for that format."""


def problem(message: str, fix: str, code: str) -> str:
    """A validation problem carrying its code and fix, as the error ``code`` is registered to
    would print it."""
    return str(registered()[code](message, fix=fix, code=code))


@dataclass(frozen=True)
class Sink:
    """What a sink writes to: a format and its options, or a per-batch function."""

    format: str
    options: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold secrets
    func: Callable[[DataFrame, int], Any] | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        """The name of the connector serving its format (``kafka``, ``delta``, ...),
        :data:`FOREACH_BATCH`, or :data:`SPARK`."""
        if self.func is not None:
            return FOREACH_BATCH
        connector = find(self.format)
        return connector.name if connector is not None else SPARK

    @property
    def connector_sink(self) -> ConnectorSink | None:
        """The connector sink side that writes it; None for a function or a Spark format (or a
        connector that only reads: refused by :meth:`problems`)."""
        return sink_for(self.format) if self.func is None else None

    def option(self, name: str) -> str | None:
        """An option by name, in any case (as Spark looks them up)."""
        return Options(self.options).get(name) or None

    @property
    def keys(self) -> list[str]:
        """The columns its connector upserts on (the PostgreSQL sink's ``keys`` option)."""
        side = self.connector_sink
        return side.keys(self.options) if side is not None else []

    @property
    def table(self) -> str | None:
        """The lakehouse table it writes by name (a Delta sink's ``tableName``), if any."""
        side = self.connector_sink
        return side.table(self.options) if side is not None else None

    def delta_root(self, lakehouse: Lakehouse) -> str | None:
        """The Delta table it writes, when the checkpoint guard can look into it."""
        side = self.connector_sink
        return side.delta_root(self.options, lakehouse) if side is not None else None

    @property
    def upserts(self) -> bool:
        """Whether a batch's rows may replace earlier ones (so an aggregate's update mode fits)."""
        return bool(self.keys) or self.kind == FOREACH_BATCH

    @property
    def shown_options(self) -> dict[str, str]:
        """The options with secrets masked: what logs, the event log and the UI may show."""
        return dict(redact(dict(self.options)))

    def describe(self) -> str:
        """A human name without secrets, e.g. 'Kafka topic alerts'."""
        if self.func is not None:
            return f"foreach_batch {getattr(self.func, '__name__', 'function')}()"
        side = self.connector_sink
        if side is not None:
            return side.describe(self.options)
        path = self.option("path")
        return f"{self.format} {redact_text(path)}" if path else self.format

    def problems(self, name: str) -> list[str]:
        """Misuse found from the declaration alone: an unknown format, a missing option."""
        side = self.connector_sink
        if self.kind not in (FOREACH_BATCH, SPARK) and side is None:
            return [
                problem(
                    f"sink {name!r}: format {self.format!r} is a lakefeed source, not a sink",
                    f"use {', '.join(sink_names())}, a format Spark writes (parquet, json, ...), "
                    "or @lf.foreach_batch_sink",
                    SINK_FORMAT,
                )
            ]
        try:
            if side is not None:
                side.check(self.options)
            elif self.kind == SPARK:
                _check_spark(self)
        except LakefeedError as error:
            return [problem(f"sink {name!r}: {error.message}", error.fix or "", SINK_OPTION)]
        return []


_FILE_FORMATS = {"parquet", "json", "csv", "orc", "text", "avro", "xml"}


def _check_spark(sink: Sink) -> None:
    if sink.format.lower() in _FILE_FORMATS and not sink.option("path"):
        raise ConfigError(
            f"a {sink.format} sink needs the option path (Spark's file sink writes there)",
            fix='e.g. {"path": "/data/exports/readings"}',
        )


def output_mode(name: str, sink: Sink, facts: PlanFacts) -> ModeChoice:
    """A sink takes streaming flows; rows are appended, or upserted where the sink can (an
    aggregate's changed groups in update mode). Complete mode would write every group again in
    each batch, which a sink cannot take back: refused."""
    if not facts.streaming:
        return ModeChoice(
            None,
            [
                problem(
                    f"flow {name!r} writes a sink but returned a batch DataFrame",
                    "read its inputs with lf.read_stream(...)/lf.source(...): a sink takes "
                    "streaming flows only",
                    SINK_FLOW,
                )
            ],
        )
    if facts.aggregate and sink.upserts:
        return ModeChoice("update")
    choice = choose_output_mode(name, "table", facts, None)
    if choice.mode == "complete":
        return ModeChoice(
            None,
            [
                problem(
                    f"flow {name!r} aggregates without a watermark into a sink that appends: "
                    "every batch would append all groups again",
                    "add a withWatermark(...) and group by a window (append once closed), or "
                    "write a PostgreSQL sink with keys, a foreach_batch_sink, or a table",
                    SINK_FLOW,
                )
            ],
        )
    return choice


def read_refusal(reader: str, sink: str) -> str:
    """A flow reading a sink: sinks are written, never read."""
    return problem(
        f"{reader!r} reads {sink!r}, which is a sink: a sink's rows leave the pipeline",
        f"read what the flows into {sink!r} read, or make it a table (lf.create_streaming_table"
        f"({sink!r})) and write the sink from it",
        SINK_READ,
    )


# -- the batch a foreach_batch_sink function is writing ------------------------------------------


@dataclass(frozen=True)
class BatchContext:
    """The micro-batch a ``foreach_batch_sink`` function is called with.

    ``app_id`` is the flow's query id (kept in its checkpoint, the same across restarts) and
    ``batch_id`` Spark's batch number: a replayed batch comes again with the same pair, so a
    write that records them atomically (Delta ``txnAppId``/``txnVersion``, a MERGE's
    ``withTransaction``, the PostgreSQL sink's commit table) applies it once.
    """

    sink: str
    flow: str
    app_id: str
    batch_id: int


_BATCH: ContextVar[BatchContext | None] = ContextVar("lakefeed_sink_batch", default=None)


def current_batch() -> BatchContext:
    """The batch the running ``foreach_batch_sink`` function writes (see :class:`BatchContext`)."""
    batch = _BATCH.get()
    if batch is None:
        raise PipelineDefinitionError(
            "lakefeed.current_batch() is only known inside a foreach_batch_sink function",
            fix="call it from the function decorated with @lf.foreach_batch_sink",
            code=SINK_FLOW,
        )
    return batch


def writing(batch: BatchContext) -> AbstractContextManager[BatchContext]:
    """Make ``batch`` the current one while a sink function runs."""
    return bound(_BATCH, batch)
