"""A context variable set for the length of a ``with`` block.

The runtime hands code it calls what is current — the pipeline being loaded, the resolver and
session a flow function evaluates with, the flow, a sink's batch — through context variables,
so threads running other flows (continuous runs, ``foreachBatch``) never see each other's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def bound(var: ContextVar[T | None], value: T) -> Iterator[T]:
    """``var`` is ``value`` inside the block and what it was before after it."""
    token = var.set(value)
    try:
        yield value
    finally:
        var.reset(token)
