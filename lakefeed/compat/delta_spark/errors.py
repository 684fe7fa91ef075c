"""The delta-spark look-alike's errors: its own (SQL text, expressions) registered here, and the
engine's it raises too (:mod:`lakefeed.delta.errors`), under the names delta-spark code imports."""

from __future__ import annotations

from lakefeed.core.errors import DeltaError
from lakefeed.delta.errors import (
    DeltaOperationError,
    DeltaTableNotFoundError,
    MergeMultipleMatchesError,
)

__all__ = [
    "DeltaOperationError",
    "DeltaSqlError",
    "DeltaTableNotFoundError",
    "ExpressionError",
    "MergeMultipleMatchesError",
]


class DeltaSqlError(DeltaError, ValueError):
    """Delta SQL text lakefeed cannot read, or a Delta statement it cannot run."""

    code = "DELTA_SQL"


class ExpressionError(DeltaError, ValueError):
    """A condition or value that cannot be handed to the Delta engine."""

    code = "DELTA_EXPRESSION"
