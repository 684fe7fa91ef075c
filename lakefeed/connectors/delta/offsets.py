"""Streaming offsets over a Delta table and the planning of micro-batches, Spark-free.

An offset is Delta's own: (reservoirVersion, index, isStartingVersion). It names the last file
a batch took; files are ordered by (version, index within the version's data-changing adds).
``isStartingVersion`` marks files of the initial snapshot (read from delta-rs, so checkpoints
work), which sit at their snapshot version before the commits that follow it.

Two conventions keep every (start, end) pair decodable after a restart: the first batch never
mixes snapshot and later commits, and a batch that finishes a version ends at
(next version, -1), so restarts do not need JSON commits that log cleanup may have removed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakefeed.connectors.delta.errors import INCOMPATIBLE_SCHEMA
from lakefeed.core.errors import CheckpointError
from lakefeed.delta import log, pruning
from lakefeed.delta.log import Commit, DataFile, DeltaSourceError
from lakefeed.delta.mapping import ColumnMapping

SOURCE_VERSION = 1


@dataclass(frozen=True)
class DeltaOffset:
    version: int
    index: int
    starting: bool

    @property
    def key(self) -> tuple[int, int]:
        return (self.version, self.index)

    @property
    def needed_version(self) -> int:
        """The newest table version this offset stands on: the snapshot it reads, or the last
        commit it finished (-1: none). A table whose latest version is below it went back."""
        return self.version if self.starting or self.index >= 0 else self.version - 1

    def to_dict(self, table_id: str | None = None) -> dict:
        """Delta's offset JSON; ``reservoirId`` (the table's id) names the table it belongs to."""
        data = {
            "sourceVersion": SOURCE_VERSION,
            "reservoirVersion": self.version,
            "index": self.index,
            "isStartingVersion": self.starting,
        }
        return {**data, "reservoirId": table_id} if table_id is not None else data

    @classmethod
    def from_dict(cls, data: dict) -> DeltaOffset:
        return cls(
            int(data["reservoirVersion"]), int(data["index"]), bool(data["isStartingVersion"])
        )


# "Nothing read yet; the snapshot version is chosen by the first batch's end offset."
INITIAL = DeltaOffset(-1, -1, True)


@dataclass(frozen=True)
class Entry:
    offset: DeltaOffset
    file: DataFile


@dataclass(frozen=True)
class FeedOptions:
    """The change-handling options Delta users know, with Delta's meaning."""

    ignore_deletes: bool = False
    ignore_changes: bool = False
    skip_change_commits: bool = False
    max_files: int | None = 1000
    max_bytes: int | None = None


class ChangeFeed:
    """Files a stream reads after an offset, from snapshots and commits (cached: the driver's
    stream reader is long-lived, and Spark asks for the same ranges more than once)."""

    def __init__(
        self,
        root: str,
        options: FeedOptions,
        read_schema: pa.Schema | None = None,
        columns: ColumnMapping | None = None,
    ) -> None:
        self.root = root
        self.options = options
        self.read_schema = read_schema
        self.columns = columns or ColumnMapping("none", ())
        self._snapshots: dict[int, list[DataFile]] = {}
        self._commits: dict[int, Commit] = {}

    def snapshot(self, version: int) -> list[DataFile]:
        if version not in self._snapshots:
            self._snapshots.clear()
            table = log.open_table(self.root, version)
            self._snapshots[version] = pruning.snapshot_files(table, self.root)
        return self._snapshots[version]

    def commit(self, version: int) -> Commit:
        cached = self._commits.get(version)
        if cached is None:
            cached = log.read_commit(self.root, version)
            if cached is None:
                raise DeltaSourceError(
                    f"version {version} of the Delta table {self.root} is no longer in its log "
                    "(log cleanup ran while the stream was behind). Restart the stream with a "
                    "new checkpoint, or with option startingVersion set to a version that still "
                    "exists."
                )
            self._check(cached)
            cached.adds = [
                dataclasses.replace(
                    f, partition_values=self.columns.logical_partition_values(f.partition_values)
                )
                for f in cached.adds
            ]
            self._commits[version] = cached
        return cached

    def forget_before(self, version: int) -> None:
        for old in [v for v in self._commits if v < version]:
            del self._commits[old]

    def _check(self, commit: Commit) -> None:
        opts = self.options
        if commit.data_removes and not (
            opts.ignore_changes
            or opts.skip_change_commits
            or (opts.ignore_deletes and not commit.adds)
        ):
            kind = "updated or overwrote" if commit.adds else "deleted"
            raise DeltaSourceError(
                f"the source Delta table {self.root} {kind} data at version {commit.version}, "
                "and a stream only follows appends. Set option ignoreDeletes=true to skip "
                "commits that only delete, ignoreChanges=true to re-read the rewritten files "
                "(rows may repeat), or skipChangeCommits=true to skip such commits entirely."
            )
        if commit.reader_features is not None:
            log.refuse_features(
                commit.reader_features, self.root, reader=f"a stream (version {commit.version})"
            )
        if commit.mapping is not None:
            _check_mapping_change(self.root, commit.version, self.columns, commit.mapping)
            self._check_mapping_before(commit.version)
        if commit.schema is not None and self.read_schema is not None:
            _check_schema_change(self.root, commit.version, self.read_schema, commit.schema)

    def _check_mapping_before(self, version: int) -> None:
        """A stream restarted after a rename or drop reads with the new schema, but the
        commits it has yet to read were written under the old one: refuse the range as
        delta-spark does (it checks the schema before each metadata change as well)."""
        if not self.columns.active or version == 0:
            return
        before = log.table_mapping(log.open_table(self.root, version - 1))
        _check_mapping_change(self.root, version, before, self.columns)

    def commit_adds(self, version: int) -> list[DataFile]:
        commit = self.commit(version)
        if commit.data_removes and (
            self.options.skip_change_commits
            or (self.options.ignore_deletes and not self.options.ignore_changes)
        ):
            return []
        return commit.adds

    def entries(
        self, start: DeltaOffset, latest: int, snapshot_version: int | None = None
    ) -> Iterator[Entry]:
        """Entries after ``start`` up to table version ``latest``, in stream order."""
        if start == INITIAL:
            version = latest if snapshot_version is None else snapshot_version
            for index, file in enumerate(self.snapshot(version)):
                yield Entry(DeltaOffset(version, index, True), file)
            return  # the first batch never goes past its snapshot
        version, after = start.version, start.index
        if start.starting:
            for index, file in enumerate(self.snapshot(version)):
                if index > after:
                    yield Entry(DeltaOffset(version, index, True), file)
            version, after = version + 1, -1
        while version <= latest:
            for index, file in enumerate(self.commit_adds(version)):
                if index > after:
                    yield Entry(DeltaOffset(version, index, False), file)
            version, after = version + 1, -1

    def latest_offset(self, start: DeltaOffset, latest: int | None, limited: bool) -> DeltaOffset:
        """The end offset of the next batch (``start`` itself when there is nothing new)."""
        if latest is None or (start != INITIAL and start.version > latest):
            return start
        bytes_ = 0
        last: Entry | None = None
        for taken, entry in enumerate(self.entries(start, latest)):
            if limited and last is not None and self._full(taken, bytes_, entry.file.size):
                return self._end_after(last)
            last = entry
            bytes_ += entry.file.size
        # Everything up to ``latest`` is taken, including commits without new data (OPTIMIZE,
        # skipped deletes): step past them so the offset never waits on a JSON commit that log
        # cleanup may remove.
        return DeltaOffset(latest + 1, -1, False)

    def _full(self, files: int, bytes_: int, next_size: int) -> bool:
        opts = self.options
        if opts.max_files is not None and files >= opts.max_files:
            return True
        return opts.max_bytes is not None and bytes_ + next_size > opts.max_bytes

    def _end_after(self, entry: Entry) -> DeltaOffset:
        """Offset after ``entry``; when it completes its version, point at the next version."""
        offset = entry.offset
        count = (
            len(self.snapshot(offset.version))
            if offset.starting
            else len(self.commit_adds(offset.version))
        )
        if offset.index == count - 1:
            return DeltaOffset(offset.version + 1, -1, False)
        return offset

    def files_between(self, start: DeltaOffset, end: DeltaOffset) -> list[DataFile]:
        """Files of the batch (start, end]: a pure function of the two offsets."""
        if start == INITIAL:
            version = end.version if end.starting else end.version - 1
            if version < 0:
                return []
            return [
                e.file for e in self.entries(INITIAL, version, version) if e.offset.key <= end.key
            ]
        latest = end.version if end.index >= 0 else end.version - 1
        return [e.file for e in self.entries(start, latest) if e.offset.key <= end.key]


def _check_schema_change(root: str, version: int, read: pa.Schema, new: pa.Schema) -> None:
    by_name = {f.name: f for f in read}
    for field in new:
        old = by_name.get(field.name)
        if old is None or str(old.type) != str(field.type):
            raise DeltaSourceError(
                f"the schema of the source Delta table {root} changed at version {version} "
                f"(column {field.name!r}). Restart the stream to read with the new schema."
            )


def _check_mapping_change(root: str, version: int, read: ColumnMapping, new: ColumnMapping) -> None:
    """Refuse a commit that renames or drops a column the stream reads under column mapping
    (its files keep the physical names, so rows would come under the wrong column or lose
    one), as delta-spark's source does without a schema tracking location."""
    if not (read.active or new.active):
        return
    now = {c.name: c.physical for c in new.columns}
    for column in read.columns:
        if now.get(column.name) != column.physical:
            change = "dropped" if column.physical not in now.values() else "renamed"
            raise DeltaSourceError(
                f"the source Delta table {root} {change} column {column.name!r} at version "
                f"{version} (column mapping): a stream reads with the schema it started with, "
                "and a rename or drop is not a change it can follow",
                fix="restart the stream from a new checkpoint (a lakefeed flow: `lakefeed run "
                "PIPELINE --full-refresh TABLE`); lakefeed has no schemaTrackingLocation",
                code=INCOMPATIBLE_SCHEMA,
            )


def initial_offset(
    root: str, starting_version: str | None, starting_timestamp: str | None
) -> DeltaOffset:
    """Where a new stream starts: the current snapshot, or commits from a version/time on."""
    if starting_version is not None and starting_timestamp is not None:
        raise ValueError("set only one of startingVersion and startingTimestamp")
    if starting_version is not None:
        if starting_version.strip().lower() == "latest":
            latest = log.latest_version(root)
            return DeltaOffset((latest if latest is not None else -1) + 1, -1, False)
        try:
            version = int(starting_version)
        except ValueError:
            raise ValueError(
                f"startingVersion must be a version number or 'latest', not {starting_version!r}"
            ) from None
        if version < 0:
            raise ValueError(f"startingVersion must be >= 0, not {version}")
        return DeltaOffset(version, -1, False)
    if starting_timestamp is not None:
        when: dt.datetime = log.parse_timestamp(starting_timestamp)
        return DeltaOffset(log.version_at_timestamp(root, when), -1, False)
    return INITIAL


def committed_input(
    options: Mapping[str, str], end: Any, first_end: Any = None
) -> dict[str, str] | None:
    """Batch options that read exactly what a stream committed up to its offset ``end``: the
    table as of the last version it finished. None: ``end`` is not a Delta source offset.

    A batch reads whole versions from the start, so a stream that began at a version or time
    (``startingVersion``/``startingTimestamp``), or whose last batch stopped inside a version
    (``maxFilesPerTrigger``), has no exact batch equivalent: refused, saying so.
    """
    if not isinstance(end, dict) or not {"reservoirVersion", "index"} <= end.keys():
        return None
    offset = DeltaOffset.from_dict(end)
    given = [k for k in options if k.lower() in ("startingversion", "startingtimestamp")]
    if given:
        raise CheckpointError(
            f"a Delta stream started with {given[0]} reads only the commits after it, which no "
            "batch read of a table version can reproduce",
            fix="compare this table by hand, or rebuild it from the whole source",
        )
    if offset.index != -1 or offset.starting or offset.version < 1:
        raise CheckpointError(
            f"the Delta stream's last committed batch ended inside version {offset.version} "
            "(maxFilesPerTrigger/maxBytesPerTrigger), which no batch read of a table version "
            "can reproduce",
            fix="run the pipeline once more (available-now finishes the version), then verify",
        )
    return {"versionAsOf": str(offset.version - 1)}
