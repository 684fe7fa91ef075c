"""A writer's Delta table kept open between its commits, brought up to date incrementally.

Opening a ``DeltaTable`` reads the log from its last checkpoint: a listing of ``_delta_log``
and every JSON commit since (up to ``delta.checkpointInterval``, 100; a GET each on S3). A
stream commits every micro-batch, and before this each batch opened its table afresh twice
(the replay check and the commit): 42 GETs and 28 LISTs of the log per batch on S3
(docs/benchmarks.md, "Deployment"). A :class:`Snapshot` opens the table once and, before each
use, reads only the commits since its last look (``DeltaTable.update_incremental``: one listing
from the version it holds, one read per new commit: the writer's own last commit, and whatever
other writers committed meanwhile).

Correctness does not rest on the handle being fresh: a commit made against an older snapshot is
checked by delta-rs against every commit in between (a concurrent commit with the same ``txn``
app id fails with ``CommitFailedError``), and the idempotence check reads the snapshot right
after the update. Streams share one snapshot per table and query id (:func:`for_stream`) within
a process: a restarted driver is a new process and opens the table afresh, so its first batch
sees the latest ``txn``; a full refresh deletes the table together with the checkpoint, so the
query id (and the key) changes with it.

A table deleted (and perhaps created again at the same path) under a kept handle would leave it
describing the old log: delta-rs then refuses a log that went back, keeps a vanished one as it
was, and applies a new table's commits past the held version on top of the old state. Every use
checks the handle against what it committed (:meth:`Snapshot.note_commit`): the table must be
past the version that commit was made on and must still hold its ``txn``. A table that lost a
writer's commits fails with ``[LAKEFEED:DELTA_TABLE_REPLACED]`` (neither writing on the old state
nor skipping a batch as "already committed" by the old ``txn``); a handle that never committed
is simply opened again, as a new process would.

A handle that has not committed yet has none of those marks: a table replaced by a log of the
same length (or longer: delta-rs applies its commits to the old state) looks unchanged to it, and
its first commit would go to the new table with the partitioning and schema its batch was written
for. So until then each commit first reads the ``metaData.id`` of the table now at the root
(:meth:`Snapshot.for_commit`; one log load, once per stream and process) and refuses with
``[LAKEFEED:DELTA_TABLE_REPLACED]`` when it is not the table the write was planned on.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from lakefeed.core.errors import DataLossRiskError
from lakefeed.delta import log, replay
from lakefeed.delta.errors import TABLE_REPLACED as REPLACED

KEPT = 64
"""Streams whose snapshot a process keeps; the least recently used goes first."""


class Snapshot:
    """One writer's handle on the Delta table at ``root``; :meth:`latest` before each use."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._table: DeltaTable | None = None
        self._txns: dict[str, int | None] = {}
        self._txns_at = -1  # the version self._txns describes
        self._wrote: dict[str, int] = {}  # app id -> the newest txn committed through this handle
        self._wrote_on = -1  # the version the handle held at its last commit

    def latest(self) -> DeltaTable | None:
        """The table at its newest version, None while there is no table."""
        if self._table is not None:
            self._update(self._table)
        if self._table is None:
            try:
                self._table = log.rs_table(self.root)
            except TableNotFoundError:
                return None
        return self._table

    def for_commit(self, refresh: bool) -> DeltaTable | None:
        """The table a commit goes against: brought up to date (``refresh``) or as last seen.
        Before this handle's first commit, the table at the root must still be the one it held
        when the write was planned (the module docstring says why)."""
        planned = self._table.metadata().id if self._table is not None else None
        table = self.latest() if refresh else self.current()
        if planned is not None and not self._committed_here():
            try:
                now = log.rs_table(self.root).metadata().id
            except TableNotFoundError:
                now = None
            if now != planned:
                _replaced(self.root, f"table id {now}, the write was planned on table {planned}")
        return table

    def _committed_here(self) -> bool:
        return self._wrote_on >= 0 or bool(self._wrote)

    def note_commit(self, txn: tuple[str, int] | None) -> None:
        """Record a commit made through this handle: the table must go past the version the
        handle holds, and keep ``txn``, from now on."""
        if self._table is not None:
            self._wrote_on = self._table.version()
        if txn is not None:
            self._wrote[txn[0]] = txn[1]

    def _update(self, table: DeltaTable) -> None:
        """Read the commits since the held version; a log that went back or vanished means the
        table was deleted: refused if this handle committed to it, else opened again."""
        held = table.version()
        try:
            table.update_incremental()
        except DeltaError:
            newest = log.latest_version(self.root)
            if newest is not None and newest >= held:
                raise  # not a log that went back: delta-rs's own error
            self._lost(f"its log ends at version {newest}, the handle held version {held}")
            return
        if table.version() <= self._wrote_on:
            self._lost(f"its log ends at version {table.version()}, before the stream's commit")

    def _lost(self, what: str) -> None:
        """The table under the handle was deleted: fail if this handle committed to it, else
        forget the handle (:meth:`latest` opens whatever table is there now)."""
        if self._committed_here():
            _replaced(self.root, what)
        self._table, self._txns, self._txns_at = None, {}, -1

    def current(self) -> DeltaTable | None:
        """The table as last seen (opened now if never): enough for checks a commit repeats
        against :meth:`latest` (partition columns, schema)."""
        return self._table if self._table is not None else self.latest()

    def transaction_version(self, app_id: str) -> int | None:
        """``DeltaTable.transaction_version`` at the version :meth:`latest` last brought the
        table to, read incrementally.

        delta-rs answers it by replaying the whole log segment (every commit since the last
        checkpoint) on each call; here that happens once per app id, then only the commits
        added since are read (the newest ``txn`` of an app id wins, as in a log replay).
        """
        table = self._table
        if table is None:
            return None
        newest = table.version()
        if not (app_id in self._txns and self._follow(newest)):
            self._txns = {app_id: table.transaction_version(app_id)}
            self._txns_at = newest
        found, wrote = self._txns[app_id], self._wrote.get(app_id)
        if wrote is not None and (found is None or found < wrote):
            _replaced(
                self.root, f"it holds batch {found} of stream {app_id}, which committed {wrote}"
            )
        return found

    def committed(self, txn: tuple[str, int], offsets: str | None = None) -> bool:
        """Whether the table as :meth:`latest` last saw it holds ``txn`` (app id, version) or a
        later one. A stream's batch passes its source ``offsets``: a batch the table holds
        under other offsets is a checkpoint behind its table, refused (:mod:`.replay`)."""
        done = self.transaction_version(txn[0])
        replay.check(self.root, txn[0], txn[1], done, offsets)
        return done is not None and done >= txn[1]

    def _follow(self, newest: int) -> bool:
        """Apply the ``txn`` actions of the commits after ``_txns_at`` up to ``newest``; False
        when one of them is unreadable (its JSON gone): then the caller replays the log."""
        for version in range(self._txns_at + 1, newest + 1):
            actions = log.commit_actions(self.root, version)
            if actions is None:
                return False
            for action in actions:
                txn = action.get("txn")
                if txn is not None and txn.get("appId") in self._txns:
                    self._txns[txn["appId"]] = int(txn["version"])
            self._txns_at = version
        return True


def _replaced(root: str, what: str) -> None:
    raise DataLossRiskError(
        f"the Delta table at {root} was deleted or replaced while a stream was writing to it "
        f"({what}): the stream's batches there are gone or were written for the old table, "
        "and writing on would lose data silently",
        fix="restore the table (its _delta_log), or start the stream over into the new table "
        "with a new checkpoint (a lakefeed flow: `lakefeed run PIPELINE --full-refresh TABLE`)",
        code=REPLACED,
    )


_streams: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
_lock = threading.Lock()


def for_stream(root: str, query_id: str) -> Snapshot:
    """The snapshot a stream (``query_id``) writing ``root`` keeps across its micro-batches."""
    key = (root, query_id)
    with _lock:
        found = _streams.get(key)
        if found is None:
            found = _streams[key] = Snapshot(root)
            while len(_streams) > KEPT:
                _streams.popitem(last=False)
        _streams.move_to_end(key)
        return found
