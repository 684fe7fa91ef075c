"""The delta-spark look-alike's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import DeltaError


class DeltaSqlError(DeltaError, ValueError):
    """Delta SQL text lakefeed cannot read, or a Delta statement it cannot run."""

    code = "DELTA_SQL"


class DeltaTableNotFoundError(DeltaError):
    """``forPath``/``forName`` on something that is not a Delta table."""

    code = "DELTA_TABLE_NOT_FOUND"


class DeltaOperationError(DeltaError):
    """delta-rs refused an operation (bad condition, type mismatch, ...)."""

    code = "DELTA_OPERATION"


class ExpressionError(DeltaError, ValueError):
    """A condition or value that cannot be handed to the Delta engine."""

    code = "DELTA_EXPRESSION"


class MergeMultipleMatchesError(DeltaError):
    """Several source rows matched one target row that an update or delete clause changes."""

    code = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
