"""The discovered-file log: why a Spark offset can be a single integer.

Every file the source discovers is appended, once, to ``files.log`` (sorted by modification
time then path within one discovery). A Spark offset is an index into that log and a micro-batch
is the files with index in ``[start, end)``. Lines are never rewritten, so a batch replayed from
the checkpoint after a crash reads exactly the same files, and a file appended but not yet in
any offset is simply picked up by the next batch: nothing skipped, nothing repeated.

A batch costs one directory listing: the names already seen are kept per folder, loaded once
per stream (the driver-side reader lives in one long-lived process), and subtracted from each
folder's listing as a set, so only new names cost Python work and a stat (see ``globs.scan``).

On object storage (a schema location on ``s3://``) there is no append: each discovery that
found files writes one immutable segment, ``files/<index of its first file>.log`` (one PUT,
whole or absent), and the log is the segments in index order. Segments that overlap (a
compaction interrupted before it deleted the segments it merged) repeat the same lines and are
read once. Opening a log of more than :data:`MAX_SEGMENTS` segments first merges them into
segment 0, so a restart reads a handful of objects, not one per trigger ever run.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lakefeed.connectors.files.globs import Found, ListingCache, PathMatcher, scan
from lakefeed.connectors.files.options import OptionError, schema_location_of
from lakefeed.core import storage
from lakefeed.core.errors import CheckpointError
from lakefeed.core.storage import AnyPath, ObjectPath

SEGMENTS = "files"
MAX_SEGMENTS = 64

STATE_DIR = "_lakefeed_files"

LOG_END_OPTION = "lakefeed.fileLogEnd"
"""A batch read with this option reads the first N files of the stream's file log (under its
``cloudFiles.schemaLocation``) instead of listing the folder: exactly what the stream committed
up to offset index N (``lakefeed verify`` sets it from the checkpoint)."""


@dataclass(frozen=True)
class FileEntry:
    """One discovered file: what a reader needs and what ``_metadata`` reports."""

    path: str
    size: int
    mtime_ms: int

    def to_line(self) -> str:
        return json.dumps([self.path, self.size, self.mtime_ms]) + "\n"

    @classmethod
    def from_line(cls, line: str) -> FileEntry:
        path, size, mtime_ms = json.loads(line)
        return cls(path, int(size), int(mtime_ms))


def state_dir(schema_location: str | Path) -> AnyPath:
    return storage.as_path(str(schema_location)) / STATE_DIR


def skipped_dir(schema_location: str) -> AnyPath:
    """Records of files skipped as unreadable, written by the tasks that skipped them."""
    return state_dir(schema_location) / "skipped"


def list_files(matcher: PathMatcher) -> list[FileEntry]:
    """Every file ``matcher`` selects, oldest first (a batch read, schema inference)."""
    return _entries(scan(matcher, ListingCache.empty()))


def _entries(found: list[Found]) -> list[FileEntry]:
    entries = [FileEntry(path, size, mtime_ns // 1_000_000) for path, size, mtime_ns in found]
    entries.sort(key=lambda e: (e.mtime_ms, e.path))
    return entries


def _atomic_write(path: AnyPath, text: str) -> None:
    storage.write_bytes(str(path), text.encode(), durable=True)


class FileLog:
    """Append-only log of discovered files for one stream (one schema location)."""

    def __init__(
        self,
        folder: AnyPath,
        source_id: str,
        matcher: PathMatcher,
        seen: list[str],
        entries: list[FileEntry],
    ):
        self.folder = folder
        self.source_id = source_id
        self.matcher = matcher
        self._cache = ListingCache.empty()
        for path in seen:
            self._cache.remember(path)
        for entry in entries:
            self._cache.remember(entry.path)
        self._entries = entries

    @classmethod
    def open(cls, schema_location: str, matcher: PathMatcher, include_existing: bool) -> FileLog:
        """Load the log, creating it (and the include-existing baseline) on first use."""
        folder = state_dir(schema_location)
        folder.mkdir(parents=True, exist_ok=True)
        meta_path = folder / "source.json"
        if not meta_path.exists():
            if not include_existing:
                # Files present at the first start are marked seen, never ingested.
                existing = "".join(e.path + "\n" for e in list_files(matcher))
                _atomic_write(folder / "existing.txt", existing)
            meta = {"source_id": uuid.uuid4().hex, "path": matcher.path}
            _atomic_write(meta_path, json.dumps(meta))
        meta = json.loads(meta_path.read_text())
        if meta["path"] != matcher.path:
            raise OptionError(
                f"cloudFiles.schemaLocation {schema_location} belongs to a stream over "
                f"{meta['path']}, not {matcher.path}: give each stream its own schema location"
            )
        existing_file = folder / "existing.txt"
        seen = existing_file.read_text().splitlines() if existing_file.exists() else []
        entries = _read_entries(folder, repair=True)
        return cls(folder, meta["source_id"], matcher, seen, entries)

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self, start: int, end: int) -> list[FileEntry]:
        return self._entries[start:end]

    def discover(self) -> int:
        """List the source once, append unseen files to the log (durably); returns how many."""
        found = _entries(scan(self.matcher, self._cache))
        if found:
            self._append(found)
        return len(found)

    def _append(self, found: list[FileEntry]) -> None:
        text = "".join(e.to_line() for e in found)
        if isinstance(self.folder, ObjectPath):
            segment = self.folder / SEGMENTS / _segment_name(len(self._entries))
            if not storage.create_exclusive(str(segment), text.encode()):
                raise OptionError(
                    f"another stream appended to the file log at {self.folder} (segment "
                    f"{segment.name} exists): two streams share cloudFiles.schemaLocation. "
                    "Stop the other one, or give each stream its own schema location"
                )
        else:
            with (self.folder / "files.log").open("a") as out:
                out.write(text)
                out.flush()
                # The offset Spark checkpoints next points into these lines: they must survive.
                os.fsync(out.fileno())
        self._entries.extend(found)
        for entry in found:
            self._cache.remember(entry.path)


def _source_id(schema_location: str) -> str | None:
    meta = state_dir(schema_location) / "source.json"
    return str(json.loads(meta.read_text())["source_id"]) if meta.is_file() else None


def committed_input(
    options: Mapping[str, str], end: Any, first_end: Any = None
) -> dict[str, str] | None:
    """Batch options that read exactly the files a stream committed up to its offset ``end``
    (an index into the file log at the schema location of ``options``). None: ``end`` is not
    this source's offset."""
    if not isinstance(end, dict) or not {"sourceId", "index"} <= end.keys():
        return None
    location = schema_location_of(options)
    if location is None or _source_id(location) != end["sourceId"]:
        return None
    return {LOG_END_OPTION: str(int(end["index"]))}


def committed_files(schema_location: str, end: int) -> list[FileEntry]:
    """The first ``end`` files of the stream's log, read only (no lock, no repair)."""
    folder = state_dir(schema_location)
    entries = _read_entries(folder, repair=False)[:end]
    if len(entries) < end:
        raise CheckpointError(
            f"the file log in {folder} holds {len(entries)} files, but the stream committed "
            f"{end}: the schema location was changed or damaged",
            fix="restore the schema location, or rebuild the table with --full-refresh",
        )
    return entries


def _read_entries(folder: AnyPath, repair: bool) -> list[FileEntry]:
    if isinstance(folder, ObjectPath):
        return _read_segments(folder / SEGMENTS, compact=repair)
    path = folder / "files.log"
    if not path.exists():
        return []
    text = path.read_text()
    if text and not text.endswith("\n"):
        # A kill -9 mid-append left a torn line. No offset can point at it (the offset is only
        # returned after the fsync), so drop it; the file is rediscovered by the next listing.
        text = text[: text.rfind("\n") + 1]
        if repair:
            with path.open("r+") as f:
                f.truncate(len(text.encode()))
    return [FileEntry.from_line(line) for line in text.splitlines()]


def _segment_name(start: int) -> str:
    return f"{start:020d}.log"  # zero-padded: listed in index order


def _read_segments(folder: ObjectPath, compact: bool) -> list[FileEntry]:
    """The log from its segments; merged into segment 0 first when there are many."""
    names = sorted(n for n in storage.list_names(str(folder)) if n.endswith(".log"))
    entries: list[FileEntry] = []
    for name in names:
        start = int(name.removesuffix(".log"))
        if start > len(entries):
            raise CheckpointError(
                f"the file log in {folder} lacks lines {len(entries)} to {start - 1} (segment "
                f"{name} follows them): the schema location was damaged",
                fix="restore the schema location, or rebuild the table with --full-refresh",
            )
        lines = (folder / name).read_text().splitlines()
        entries.extend(FileEntry.from_line(line) for line in lines[len(entries) - start :])
    if compact and len(names) > MAX_SEGMENTS:
        # Segment 0 is overwritten with every line (one PUT), then the merged ones go: a crash
        # in between leaves overlapping segments, which read the same.
        (folder / _segment_name(0)).write_text("".join(e.to_line() for e in entries))
        for name in names[1:]:
            storage.remove(str(folder / name))
    return entries


def acquire_lock(folder: AnyPath, wait_s: float = 60.0) -> IO[str] | None:
    """Hold the stream's lock (until the handle is closed or the process dies).

    Two running streams must never append to one file log. The wait covers a restart in the
    same application while the previous reader process is still shutting down. Object storage
    has no lock (None): there a segment that already exists stops the second writer, and a
    lakefeed run holds its lakehouse's lease.
    """
    if isinstance(folder, ObjectPath):
        return None
    folder.mkdir(parents=True, exist_ok=True)
    handle = (folder / "lock").open("w")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise OptionError(
                    f"another running stream uses the schema location of {folder.parent}; "
                    "stop it or give this stream its own cloudFiles.schemaLocation"
                ) from None
            time.sleep(0.2)


def write_json(path: AnyPath, payload: object) -> None:
    _atomic_write(path, json.dumps(payload))
