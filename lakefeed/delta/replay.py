"""A batch whose ``txn`` the table already holds: a replay, or a checkpoint behind its table.

A stream's batch N commits ``txn(query id, N)`` into its Delta table, and a batch the table
already holds is skipped: that is how a batch replayed after a crash (between the Delta commit
and Spark's ``commits/N``) writes nothing twice. Spark replays such a batch from its
``offsets/N``, the same source offsets. A checkpoint put back from a backup, or one whose last
``offsets/N`` + ``commits/N`` an operator deleted "to retry a batch", plans batch N again over
*other* offsets (the source has grown since): skipped as "already committed", its new rows would
never reach the table, and the run would end "0 rows written" with exit code 0.

So each batch records its source offsets (a hash of the source lines of ``offsets/N``,
:func:`lakefeed.spark.offset_log.fingerprint`) in its commit's ``commitInfo``, and a skip is
allowed only for the batch the table holds last with the same offsets (or none recorded: a
commit of an older lakefeed, or one gone with log cleanup). A batch older than the table's, or
the same batch over other offsets, is refused before anything is written, with
``[LAKEFEED:CHECKPOINT_BEHIND_TABLE]``.
"""

from __future__ import annotations

from lakefeed.core.errors import DataLossRiskError
from lakefeed.delta import log
from lakefeed.delta.errors import CHECKPOINT_BEHIND as BEHIND
from lakefeed.spark import offset_log

OFFSETS = "lakefeed.sourceOffsets"
"""The commitInfo key (and the batch-write option) holding a batch's source offsets hash."""


def check(root: str, app_id: str, batch_id: int, held: int | None, offsets: str | None) -> None:
    """Refuse skipping batch ``batch_id`` of query ``app_id`` (``offsets``: its source offsets
    hash, None when the writer knows no checkpoint) when the table at ``root``, whose newest
    ``txn`` for the query is ``held``, holds a different batch under that number."""

    def recorded() -> str | None:
        found = log.txn_commit(root, app_id, batch_id)
        return _recorded(found[1]) if found is not None else None

    what = offset_log.replay_conflict(batch_id, offsets, held, recorded)
    if what is None:
        return
    raise DataLossRiskError(
        f"the checkpoint is behind its table: it runs batch {batch_id}, but the Delta table "
        f"{root} {what}; the batch would be skipped as already written and its rows would "
        "never reach the table (a checkpoint restored from an older backup, or its last "
        "offsets/commits files deleted)",
        fix=_fix(root, app_id, batch_id),
        code=BEHIND,
    )


def _recorded(actions: list[dict]) -> str | None:
    for action in actions:
        info = action.get("commitInfo")
        if info is not None and info.get(OFFSETS) is not None:
            return str(info[OFFSETS])
    return None


def _fix(root: str, app_id: str, batch_id: int) -> str:
    """Restore the pair together, naming the table version the checkpoint matches when the log
    still shows it."""
    version = matching_version(root, app_id, batch_id)
    table = (
        f"the table to version {version}, the one this checkpoint matches "
        f"(RESTORE TABLE delta.`{root}` TO VERSION AS OF {version}), and run again"
        if version is not None and version >= 0
        else "the table to the version this checkpoint matches"
    )
    return (
        "restore the checkpoint and the table together from the same backup (the checkpoint "
        f"that goes with the table as it is now), or restore {table}; or rebuild the table "
        "from its sources: `lakefeed run PIPELINE --full-refresh <table>`"
    )


def matching_version(root: str, app_id: str, batch_id: int) -> int | None:
    """The version holding the checkpoint's last committed batch (``batch_id - 1``); for a
    checkpoint with none, the version before the query's first batch. None when the log no
    longer shows it."""
    found = log.txn_commit(root, app_id, max(batch_id - 1, 0))
    if found is None:
        return None
    return found[0] if batch_id > 0 else found[0] - 1
