"""What follows a Delta commit, Spark-free: the checkpoint, the expired-log cleanup and the
symlink manifests — none of which may fail or undo the commit it follows.

delta-rs runs its own hooks inside the commit call and raises when one fails (a checkpoint it
cannot write, say), although the new version is already in the log; a writer that took that
error for a failed commit removed the version's data files and left a table nobody could read.
So lakefeed's commits ask delta-rs for no hooks (:data:`NO_HOOKS`) and run them here (:func:`run`),
where a failure becomes a :class:`Deferred` warning, logged with its fields, and is repaired
later: a checkpoint that could not be written is tried again at this process's next commit to
the table (as delta-spark, a missing checkpoint only makes readers replay more JSON commits);
manifests carry their own repair (:mod:`~lakefeed.delta.manifest`).

Whether a commit happened is read from the log, never from whether the call raised
(:func:`landed`): a commit call can fail after its JSON file was written (a timeout on a PUT
that succeeded). Only the files of a commit that is not in the log may be removed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import unquote

from deltalake import DeltaTable, PostCommitHookProperties

from lakefeed.delta import log, manifest
from lakefeed.delta.files import WrittenFile, remove_files

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
"""What every lakefeed commit through delta-rs passes: the hooks run in :func:`run` instead."""

SCAN = 200
"""Commits a failed write's cleanup looks back through for the write's files."""

_log = logging.getLogger("lakefeed.delta.commit")
_owed: set[str] = set()
"""Tables whose due checkpoint failed in this process: the next commit writes one."""


@dataclass(frozen=True)
class Deferred:
    """A post-commit step that failed after the commit at ``version`` of ``table``: the commit
    stands, the step is repaired later (see the module docstring)."""

    step: str  # "checkpoint" | "log cleanup" | "commit" (the call raised, the log holds it)
    table: str
    version: int
    error: str

    def report(self) -> None:
        """Log the warning with its fields (``extra``) for log collectors and tests."""
        _log.warning(
            "the Delta commit of version %d of %s stands, but its %s failed (repaired later): %s",
            self.version,
            self.table,
            self.step,
            self.error,
            extra={"table": self.table, "version": self.version, "step": self.step},
        )


def _setting(configuration: Mapping[str, str], key: str, default: str) -> str:
    lowered = key.lower()
    found = next((v for k, v in configuration.items() if k.lower() == lowered), None)
    return str(found) if found is not None else default


def checkpoint_due(configuration: Mapping[str, str], version: int) -> bool:
    """delta-spark's rule: a checkpoint at every ``delta.checkpointInterval``-th version."""
    interval = int(_setting(configuration, CHECKPOINT_INTERVAL, "100") or 100)
    return version > 0 and version % max(interval, 1) == 0


def run(
    root: str,
    configuration: Mapping[str, str],
    version: int,
    since: int,
    latest: Callable[[], DeltaTable | None],
) -> tuple[Deferred, ...]:
    """The hooks after the commit of ``version`` (made on ``since``) to the table at ``root``
    whose properties are ``configuration``; ``latest``: the table at its newest version (opened
    only when a hook needs it). Never raises: the failures are returned, each already logged."""
    failures: list[Deferred] = []
    if root in _owed or checkpoint_due(configuration, version):
        failures += _checkpoint(root, configuration, version, latest)
    manifest.after_commit(root, configuration, since, latest)
    return tuple(failures)


def _checkpoint(
    root: str,
    configuration: Mapping[str, str],
    version: int,
    latest: Callable[[], DeltaTable | None],
) -> list[Deferred]:
    """Write the checkpoint, then (as delta-spark, only then) remove expired log files."""
    try:
        table = latest()
        if table is None:
            return []
        table.create_checkpoint()
    except Exception as error:  # noqa: BLE001 - the commit stands; the next commit retries
        _owed.add(root)
        return [_deferred("checkpoint", root, version, error)]
    _owed.discard(root)
    if _setting(configuration, EXPIRED_LOG_CLEANUP, "true").strip().lower() != "true":
        return []
    try:
        table.cleanup_metadata()
    except Exception as error:  # noqa: BLE001 - expired files wait for the next checkpoint
        return [_deferred("log cleanup", root, version, error)]
    return []


def _deferred(step: str, root: str, version: int, error: BaseException) -> Deferred:
    found = Deferred(step, root, version, f"{type(error).__name__}: {error}")
    found.report()
    return found


def landed(root: str, since: int, paths: Iterable[str], txn: tuple[str, int] | None) -> int | None:
    """The version after ``since`` whose commit is this write's: one that adds one of its
    ``paths`` (relative to the table, as written), or, for a write without files, carries its
    ``txn``; None when the log holds no such commit (then, and only then, the write's files may
    be removed). Files, not the txn, decide when there are files: a zombie writer's commit with
    the same txn holds other files."""
    wanted = set(paths)
    newest = log.latest_version(root)
    for version in range(since + 1, (newest if newest is not None else -1) + 1):
        for action in log.commit_actions(root, version) or ():
            if wanted and "add" in action and unquote(action["add"]["path"]) in wanted:
                return version
            found = action.get("txn") or {}
            if not wanted and txn is not None and (found.get("appId"), found.get("version")) == txn:
                return version
    return None


def remove_unless_committed(root: str, files: Sequence[WrittenFile]) -> None:
    """Remove the files of a write that failed, unless the log holds them (a commit whose call
    raised after it landed, among the newest :data:`SCAN` versions). A log that cannot be read
    keeps them: orphans cost space until ``vacuum``, a removed committed file loses data."""
    if not files:
        return
    try:
        newest = log.latest_version(root)
        since = max(-1, (newest if newest is not None else -1) - SCAN)
        found = landed(root, since, [f.path for f in files], None)
    except Exception as error:  # noqa: BLE001 - cannot tell: keep the files
        _log.warning(
            "a failed write's files stay in %s: its log could not be read (%s); vacuum "
            "removes them if they were not committed",
            root,
            error,
            extra={"table": root, "files": len(files)},
        )
        return
    if found is None:
        remove_files(root, files)
