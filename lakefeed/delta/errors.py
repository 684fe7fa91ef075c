"""The Delta engine's errors: an operation delta-rs refused, a path without a table, a MERGE
source with several rows for one target row, and what lakefeed cannot honour.

They live with the engine (every caller of it may meet them); delta-spark's surface
(:mod:`lakefeed.compat.delta_spark`) raises and re-exports the same classes and codes.
"""

from __future__ import annotations

from typing import NoReturn

from deltalake.exceptions import DeltaError as RsDeltaError

from lakefeed.core.errors import DeltaError, register_code


class DeltaTableNotFoundError(DeltaError):
    """``forPath``/``forName`` on something that is not a Delta table."""

    code = "DELTA_TABLE_NOT_FOUND"


class DeltaOperationError(DeltaError):
    """delta-rs refused an operation (bad condition, type mismatch, ...)."""

    code = "DELTA_OPERATION"


class MergeMultipleMatchesError(DeltaError):
    """Several source rows matched one target row that an update or delete clause changes."""

    code = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"


UNSUPPORTED = register_code("DELTA_UNSUPPORTED_BY_LAKEFEED", DeltaOperationError)

# delta-rs's wording for its check of the MERGE rule above (it has no error class of its own).
_DUPLICATE_MATCH = "matched a target row with multiple source rows"


def translate_merge_error(error: RsDeltaError) -> DeltaError | None:
    """delta-rs's duplicate-match failure as :class:`MergeMultipleMatchesError`, else None."""
    if _DUPLICATE_MATCH in str(error):
        return MergeMultipleMatchesError(
            f"the MERGE source has several rows matching one target row: {error}",
            fix="deduplicate the source on the merge keys (e.g. keep the latest row per key)",
        )
    return None


def unsupported(call: str, why: str, fix: str) -> NoReturn:
    """Refuse ``call``, which lakefeed cannot honour (``DELTA_UNSUPPORTED_BY_LAKEFEED``)."""
    raise DeltaOperationError(
        f"{call} is not supported by lakefeed: {why}", fix=fix, code=UNSUPPORTED
    )
