"""The named choices of the public API: what a dataset is, and how a run runs.

Both are ``StrEnum``: a member *is* its string (``RunMode.AVAILABLE_NOW == "available-now"``),
so the CLI's ``--mode available-now``, event-log JSON and code comparing plain strings keep
working while Python callers get completion and a type checker's help.
"""

from __future__ import annotations

from enum import StrEnum


class DatasetKind(StrEnum):
    """What a pipeline dataset is (DLT/SDP's three kinds, and their sinks)."""

    STREAMING_TABLE = "table"  # @lf.table / CREATE STREAMING TABLE: appended to incrementally
    MATERIALIZED_VIEW = "materialized_view"  # recomputed in batch on each refresh
    VIEW = "view"  # a named DataFrame, inlined into its readers, never stored
    SINK = "sink"  # outside the lakehouse (create_sink / foreach_batch_sink): written, never read


class RunMode(StrEnum):
    """How ``lakefeed.run`` / ``lakefeed run --mode`` runs a pipeline (see the runner)."""

    CONTINUOUS = "continuous"  # every flow at once, processingTime trigger, until stopped
    AVAILABLE_NOW = "available-now"  # what is there, flow by flow, then stop
    ONCE = "once"  # one micro-batch per flow
    BACKFILL = "backfill"  # the flow functions as batch DataFrames, replacing the tables


def choices(enum: type[StrEnum]) -> list[str]:
    """The values of ``enum``, for ``click.Choice`` and error messages."""
    return [member.value for member in enum]
