"""Which flow is being evaluated right now, so connectors can default per-flow locations.

A connector such as ``lakefeed.read_files`` needs a schema folder that is stable for one flow
(``cloudFiles.schemaLocation``) without making the user spell it out. The runtime sets the
current flow while it calls a flow function; connectors ask :func:`current_flow`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.scoped import bound


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
