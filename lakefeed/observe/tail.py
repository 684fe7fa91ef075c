"""Follow the event log as it grows, reading only the files added since the last look.

The event log gets one small commit per flush (about one per second while a pipeline runs);
re-reading the whole table on every UI poll would grow slower with every minute of running.
:class:`EventTail` keeps the delta-rs handle, refreshes it incrementally, and reads just the new
data files. If files disappear (the log was compacted or rewritten) it starts over, and
:class:`LiveMonitor` rebuilds its fold from scratch. A damaged log never stops it: it shows the
events it can read and keeps a list of what is wrong (:attr:`EventTail.problems`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from lakefeed.core.storage import Location, join, stamp
from lakefeed.observe.figures import Monitor
from lakefeed.runtime.event_log import first_line, open_log, read_fragments, repair_hint


def _events(table: pa.Table) -> list[dict[str, Any]]:
    rows = table.sort_by("timestamp").to_pylist()
    for row in rows:
        row["details"] = json.loads(row["details"]) if row["details"] else {}
    return rows


def event_record(event: dict[str, Any]) -> dict[str, Any]:
    """An event as plain JSON types (the timestamp as ISO-8601 text)."""
    return {**event, "timestamp": event["timestamp"].isoformat()}


class EventTail:
    """New events of an event-log Delta table, oldest first, each event returned once."""

    def __init__(self, path: Location) -> None:
        self.path = str(path)
        self._table: DeltaTable | None = None
        self._version: int | None = None
        self._seen: set[str] = set()
        self._log_problem: str | None = None
        self._file_problems: dict[str, str] = {}
        self._stamp: tuple[int, int] | None = None

    @property
    def problems(self) -> list[str]:
        """What cannot be read right now (a damaged commit, a lost or truncated data file)."""
        head = [self._log_problem] if self._log_problem else []
        return head + list(self._file_problems.values())

    def _commit_stamp(self, version: int) -> tuple[int, int] | None:
        """Identity of a commit file: a log rewritten in place (repair, reset) changes it."""
        try:
            return stamp(join(self.path, "_delta_log", f"{version:020d}.json"))
        except OSError:
            return None

    def _refresh(self) -> DeltaTable | None:
        if self._table is not None and self._commit_stamp(self._table.version()) != self._stamp:
            self._table = self._version = None  # the log was replaced: read it from the start
        if self._table is None:
            self._table, self._log_problem = open_log(self.path)
        else:
            try:
                self._table.update_incremental()
                self._log_problem = None
            except Exception as e:  # a damaged newer commit: keep what we have
                self._table, self._log_problem = open_log(self.path)
                if self._log_problem is None and self._table is None:
                    self._log_problem = f"the event log cannot be read: {first_line(e)}"
        if self._table is not None:
            self._stamp = self._commit_stamp(self._table.version())
        return self._table

    def poll(self) -> tuple[bool, list[dict[str, Any]]]:
        """``(reset, events)``: ``reset`` means start over, ``events`` is then the whole log."""
        table = self._refresh()
        if table is None or table.version() == self._version:
            return False, []  # no log, or no commit since the last look: skip listing files
        self._version = table.version()
        dataset = table.to_pyarrow_dataset()
        fragments = {fragment.path: fragment for fragment in dataset.get_fragments()}
        reset = not self._seen <= fragments.keys()
        if reset:
            self._seen = set()
            self._file_problems = {}
        new = [fragment for path, fragment in fragments.items() if path not in self._seen]
        self._seen.update(fragment.path for fragment in new)
        if not new:
            return reset, []
        rows, unreadable = read_fragments(dataset, new)
        self._file_problems.update(unreadable)
        return reset, _events(rows)


class LiveMonitor:
    """A :class:`Monitor` kept current with the event log, plus the latest raw events.

    Safe to share between threads (the UI server's request workers).
    """

    def __init__(
        self, event_log_path: Location, min_interval: float = 0.5, keep_recent: int = 500
    ) -> None:
        self._tail = EventTail(event_log_path)
        self._min_interval = min_interval
        self._lock = threading.Lock()
        self._checked = 0.0
        self.monitor = Monitor()
        self.recent: deque[dict[str, Any]] = deque(maxlen=keep_recent)

    def refresh(self) -> Monitor:
        """Fold in new events (at most every ``min_interval`` seconds) and return the monitor."""
        with self._lock:
            if time.monotonic() - self._checked >= self._min_interval:
                reset, events = self._tail.poll()
                if reset:
                    self.monitor = Monitor()
                    self.recent.clear()
                self.monitor.apply_all(events)
                self.monitor.event_log_problems = self._tail.problems
                self.monitor.event_log_fix = (
                    repair_hint(self._tail.path) if self._tail.problems else None
                )
                self.recent.extend(events)
                self._checked = time.monotonic()
            return self.monitor
