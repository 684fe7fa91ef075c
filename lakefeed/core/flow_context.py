"""Which flow is being evaluated right now, and what resolves its reads.

A connector such as ``lakefeed.read_files`` needs a schema folder that is stable for one flow
(``cloudFiles.schemaLocation``) without making the user spell it out, and inside a flow hands
its read to the runtime, which decides stream or batch by the run mode. The runtime sets the
current flow and its :class:`Resolver` while it calls a flow function; connectors ask
:func:`current_flow` and :func:`read_source`. Both live here, below the connectors, so that
they need not import the pipeline model that sits above them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from lakefeed.core.scoped import bound

if TYPE_CHECKING:  # types only: the connectors' declarations import this module, kept light
    from pyspark.sql import DataFrame

    from lakefeed.core.lakehouse import Lakehouse


@dataclass(frozen=True)
class FlowContext:
    """The flow whose function is running and the lakehouse it writes into."""

    name: str
    lakehouse: Lakehouse

    @property
    def schema_path(self) -> str:
        """Default folder for schemas inferred on behalf of this flow."""
        return str(self.lakehouse.schema_path(self.name))


_CURRENT: ContextVar[FlowContext | None] = ContextVar("lakefeed_current_flow", default=None)


def current_flow() -> FlowContext | None:
    """The flow being evaluated, or None outside a pipeline run (e.g. in a notebook)."""
    return _CURRENT.get()


def flow_context(name: str, lakehouse: Lakehouse) -> AbstractContextManager[FlowContext]:
    """Make ``name`` the current flow for the duration of the ``with`` block."""
    return bound(_CURRENT, FlowContext(name, lakehouse))


class Resolver(Protocol):
    """What the runtime provides while a flow function runs."""

    def read(self, name: str, streaming: bool, options: Mapping[str, str]) -> DataFrame: ...

    def source(self, fmt: str, path: str | None, options: Mapping[str, str]) -> DataFrame: ...


_RESOLVER: ContextVar[Resolver | None] = ContextVar("lakefeed_resolver", default=None)


def resolving(resolver: Resolver) -> AbstractContextManager[Resolver]:
    """``lf.read``/``lf.read_stream`` in this block resolve through ``resolver``."""
    return bound(_RESOLVER, resolver)


def current_resolver() -> Resolver:
    """The runtime's resolver for the flow function running now (e.g. to wrap it in tests)."""
    return active_resolver("current_resolver")


def active_resolver(what: str) -> Resolver:
    """The current resolver; outside a flow function, an error saying that ``lakefeed.what()``
    only works inside one."""
    resolver = _RESOLVER.get()
    if resolver is None:
        raise RuntimeError(
            f"lakefeed.{what}() only works inside a flow function that lakefeed evaluates: "
            "run the pipeline with `lakefeed run FILE` (or lakefeed.run(...))"
        )
    return resolver


def read_source(fmt: str, path: str | None, options: Mapping[str, str]) -> DataFrame:
    """An outside source of Spark format ``fmt``, read as the flow being evaluated needs it
    (streaming in stream modes, batch in backfill; see ``lakefeed.source``)."""
    resolver = active_resolver("source")
    return outside_source(
        lambda: resolver.source(fmt, path, options), source_names(path, options), None
    )


class SourceTap(Protocol):
    """What may stand in for the outside sources a flow function reads (the test kit's fed
    batches): ``read`` reads the real source; ``names`` are what identify it (a Kafka topic, a
    path, a table name); ``streaming`` is whether the reader asked for a stream, None when the
    resolver decides it."""

    def __call__(
        self, read: Callable[[], DataFrame], names: tuple[str, ...], streaming: bool | None
    ) -> DataFrame: ...


_TAP: ContextVar[SourceTap | None] = ContextVar("lakefeed_source_tap", default=None)


def tapping(tap: SourceTap) -> AbstractContextManager[SourceTap]:
    """Outside sources read in this block, whichever way the code reads them, go through
    ``tap``."""
    return bound(_TAP, tap)


def tapped() -> bool:
    """Whether a :class:`SourceTap` is in place (a reader must then hand it its reads)."""
    return _TAP.get() is not None


def outside_source(
    read: Callable[[], DataFrame], names: tuple[str, ...], streaming: bool | None
) -> DataFrame:
    """An outside source a flow function reads — ``lakefeed.source`` and its kin, or Spark's
    own reader in DLT/SDP code (``spark.readStream.format("kafka")...load()``) — as ``read``
    reads it, unless a tap (:func:`tapping`) stands in for it. One entry for every way, so a
    test feeds a pipeline file written for DLT or SDP as it is."""
    tap = _TAP.get()
    if tap is None:
        return read()
    with bound(_TAP, None):  # what the tap reads (the source, its stand-in) reads as it is
        return tap(read, names, streaming)


def source_names(path: str | None, options: Mapping[str, str]) -> tuple[str, ...]:
    """What identifies an outside source to a person: its path or table name, its Kafka
    topics (``subscribe`` lists them with commas) or topic pattern."""
    given = {key.lower(): value for key, value in options.items()}
    topics = given.get("subscribe", "").split(",")
    named = [path, given.get("path"), *topics, given.get("subscribepattern")]
    return tuple(dict.fromkeys(n.strip() for n in named if n and n.strip()))
