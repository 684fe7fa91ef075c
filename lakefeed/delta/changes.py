"""Delta's Change Data Feed: ``option("readChangeFeed", "true")`` in batch and streaming reads.

With the table property ``delta.enableChangeDataFeed = true``, delta-rs and lakefeed's
deletion-vector writes (:mod:`~lakefeed.delta.dv_write`) record row changes: MERGE, UPDATE
and DELETE write ``_change_data`` files (``update_preimage`` / ``update_postimage`` /
``delete`` / ``insert`` rows), and a commit without them (an append by lakefeed's or
delta-rs's writer, an overwrite) is read as ``insert`` for the files it adds and ``delete`` for
the files it removes — Delta's rule. Reads go through delta-rs's ``load_cdf``
(:mod:`~lakefeed.delta.change_rows` on a table with deletion vectors, whose files
``load_cdf`` would read whole), which resolves versions, timestamps and the per-commit files,
and streams Arrow batches; an executor task of the Python data source calls it and hands the
batches to Spark (nothing is collected on the driver), with the table's columns plus
``_change_type``, ``_commit_version`` (long) and ``_commit_timestamp`` (timestamp, UTC) as
Delta documents. A batch read is refused in the caller's process when its options or range
are wrong (:func:`check`), and its end is pinned to the latest version at planning time.

Options, as Delta's: ``startingVersion`` or ``startingTimestamp`` (one is required in batch),
``endingVersion`` / ``endingTimestamp`` (default: the latest version). A range touching a
version written while the feed was off is refused (delta-rs checks it).

Streaming (:class:`ChangeFeedStreamReader`, the Python data source: change rows are not plain
Parquet files Spark could scan): an offset is the next table version to read; each micro-batch
reads every committed version since (no rate limits), each executor task calling ``load_cdf``.
Without a starting version the stream begins, as Delta's, with the table's current snapshot as
``insert`` rows of that version, then its changes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError as RsDeltaError
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lakefeed.core import storage
from lakefeed.core.options import Options
from lakefeed.delta import change_rows, log, pruning
from lakefeed.delta.errors import ChangeFeedError
from lakefeed.delta.files import read_file
from lakefeed.delta.options import register_settings, table_root
from lakefeed.delta.schema import table_arrow_schema
from lakefeed.delta.spark_read import spark_schema as table_schema

OPTION = "readChangeFeed"
CHANGE_COLUMNS = pa.schema(
    [
        pa.field("_change_type", pa.string()),
        pa.field("_commit_version", pa.int64()),
        pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC")),
    ]
)


def requested(options: Mapping[str, str]) -> bool:
    return Options(options).flag(OPTION)


def spark_schema(root: str) -> StructType:
    """The schema of a change feed read: the table's columns, then Delta's change columns."""
    columns = table_schema(log.open_table(root)).fields
    return StructType(columns + from_arrow_schema(CHANGE_COLUMNS).fields)


def check(options: Mapping[str, str]) -> None:
    """Refuse a bad change feed read in the caller's process, before Spark plans it."""
    root = table_root(options)
    open_feed(root, feed_arguments(root, options))


def feed_arguments(root: str, options: Mapping[str, str]) -> dict[str, Any]:
    """``load_cdf``'s arguments for the options; the end is pinned to the latest version now,
    so the read sees the table as of planning, as Delta's batch reads do."""
    given = Options(options)
    start_version = given.get("startingVersion")
    start_time = given.get("startingTimestamp")
    end_version = _version(given.get("endingVersion"), "endingVersion")
    end_time = given.get("endingTimestamp")
    if (start_version is None) == (start_time is None):
        raise ChangeFeedError(
            f"a change feed read of {root} needs exactly one of startingVersion and "
            "startingTimestamp",
            fix='add .option("startingVersion", 0) (or a startingTimestamp)',
        )
    if end_version is None and end_time is None:
        end_version = log.latest_version(root)
    return {
        "starting_version": _version(start_version, "startingVersion") or 0,
        "ending_version": end_version,
        "starting_timestamp": _timestamp(start_time),
        "ending_timestamp": _timestamp(end_time),
    }


def open_feed(root: str, arguments: Mapping[str, Any]) -> pa.RecordBatchReader:
    """delta-rs's change rows for ``arguments``; its refusals become :class:`ChangeFeedError`."""
    try:
        table = log.open_table(root)
        log.check_readable(table, root, _FEED_READS, "lakefeed's change data feed")
        if _FROM_LOG & log.needed_features(table.protocol()):
            return _vector_feed(table, root, arguments)
        return pa.RecordBatchReader.from_stream(table.load_cdf(**arguments))
    except RsDeltaError as error:
        raise ChangeFeedError(
            f"cannot read the change feed of {root}: {error}",
            fix="set the table property delta.enableChangeDataFeed=true before the changes "
            "you read, and start at or after the version that set it",
        ) from error


_FROM_LOG = frozenset({"deletionVectors", "columnMapping"})
"""Features delta-rs's ``load_cdf`` reads wrong (files whole, columns by logical name): such
tables' changes come from :mod:`.change_rows`."""
_FEED_READS = log.PLAIN_PARQUET | _FROM_LOG


def _vector_feed(
    table: DeltaTable, root: str, arguments: Mapping[str, Any]
) -> pa.RecordBatchReader:
    """The change rows of a table with deletion vectors or column mapping
    (:mod:`.change_rows`): delta-rs's ``load_cdf`` would read its files whole, or look for
    columns by their logical names."""
    first, last = _version_range(root, arguments)
    schema = table_arrow_schema(table.schema())
    for field in CHANGE_COLUMNS:
        schema = schema.append(field)
    if first > last:
        return pa.RecordBatchReader.from_batches(schema, iter([]))
    rows = change_rows.rows(table, root, first, last, CHANGE_COLUMNS)
    return pa.RecordBatchReader.from_batches(schema, rows)


def _version_range(root: str, arguments: Mapping[str, Any]) -> tuple[int, int]:
    """``load_cdf``'s arguments as the first and last version to read."""
    first = arguments.get("starting_version") or 0
    if arguments.get("starting_timestamp"):
        first = log.version_at_timestamp(root, log.parse_timestamp(arguments["starting_timestamp"]))
    last = arguments.get("ending_version")
    if arguments.get("ending_timestamp"):
        end = log.parse_timestamp(arguments["ending_timestamp"])
        last = log.version_at_timestamp(root, end + dt.timedelta(milliseconds=1)) - 1
    latest = log.latest_version(root) or 0
    return int(first), latest if last is None else min(int(last), latest)


def _conformed(
    root: str, arguments: Mapping[str, Any], schema: StructType
) -> Iterator[pa.RecordBatch]:
    """The change rows as batches of exactly the Spark schema's Arrow form."""
    target = to_arrow_schema(schema, timezone="UTC")
    for batch in open_feed(root, arguments):
        yield from _cast(pa.Table.from_batches([batch]), target).to_batches()


@dataclass
class ChangeRange(InputPartition):
    """One task: ``load_cdf`` with these arguments."""

    arguments: dict[str, Any]


class ChangeFeedBatchReader(storage.CarriesSettings, DataSourceReader):
    """``read.format("delta").option("readChangeFeed", "true")``: one task reads the range."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.root = register_settings(options)
        self.carry(self.root)
        self.arguments = feed_arguments(self.root, options)
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        return [ChangeRange(self.arguments)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChangeRange)
        return _conformed(self.root, partition.arguments, self.schema)


def _version(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    if not text.strip().isdigit():
        raise ChangeFeedError(f"{name} must be a table version (0, 1, ...), not {text!r}")
    return int(text)


def _timestamp(text: str | None) -> str | None:
    """A user's timestamp as the RFC 3339 text delta-rs takes (zone-less text is UTC)."""
    if text is None:
        return None
    return log.parse_timestamp(text).isoformat()


def _cast(changes: pa.Table, schema: pa.Schema) -> pa.Table:
    arrays = [changes.column(f.name).cast(f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


@dataclass
class Changes(InputPartition):
    """One task: the changes of versions ``first..last``, or (``snapshot``) the rows of version
    ``first`` as inserts."""

    first: int
    last: int
    snapshot: bool = False


class ChangeFeedStreamReader(
    storage.CarriesSettings, DataSourceStreamReader, SupportsTriggerAvailableNow
):
    """``readStream.format("delta").option("readChangeFeed", "true")``; offsets are
    ``{"next": version to read next, "snapshot": version whose snapshot is unread, or -1}``."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        given = Options(options)
        self.root = register_settings(options)
        self.carry(self.root)
        self.schema = schema
        start = _version(given.get("startingVersion"), "startingVersion")
        stamp = given.get("startingTimestamp")
        if start is not None and stamp is not None:
            raise ChangeFeedError("set only one of startingVersion and startingTimestamp")
        if stamp is not None:
            start = log.version_at_timestamp(self.root, log.parse_timestamp(stamp))
        self.start = start
        self.available_now: int | None = None

    def _latest(self) -> int:
        latest = log.latest_version(self.root)
        if latest is None:
            raise ChangeFeedError(f"{self.root} is not a Delta table")
        return latest if self.available_now is None else self.available_now

    def initialOffset(self) -> dict:
        if self.start is not None:
            return {"next": self.start, "snapshot": -1}
        latest = self._latest()
        return {"next": latest + 1, "snapshot": latest}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = log.latest_version(self.root)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        head = max(self._latest() + 1, start["next"])
        return {"next": head, "snapshot": -1}  # an unread snapshot is read by this batch

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        tasks: list[InputPartition] = []
        if start["snapshot"] >= 0:
            tasks.append(Changes(start["snapshot"], start["snapshot"], snapshot=True))
        if end["next"] > start["next"]:
            tasks.append(Changes(start["next"], end["next"] - 1))
        return tasks

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Changes)
        if partition.snapshot:
            target = to_arrow_schema(self.schema, timezone="UTC")
            yield from _cast(_snapshot(self.root, partition.first), target).to_batches()
            return
        arguments = {"starting_version": partition.first, "ending_version": partition.last}
        yield from _conformed(self.root, arguments, self.schema)

    def commit(self, end: dict) -> None:
        pass


def _snapshot(root: str, version: int) -> pa.Table:
    """The rows of ``version`` as that version's inserts."""
    table = log.rs_table(root, version)
    schema = table_arrow_schema(table.schema())
    batches = (b for f in pruning.snapshot_files(table, root) for b in read_file(root, f, schema))
    rows = pa.Table.from_batches(list(batches), schema)  # deletion vectors applied
    stamp = next((int(e["timestamp"]) for e in table.history() if int(e["version"]) == version), 0)
    count = rows.num_rows
    rows = rows.append_column("_change_type", pa.array(["insert"] * count, pa.string()))
    rows = rows.append_column("_commit_version", pa.array([version] * count, pa.int64()))
    return rows.append_column(
        "_commit_timestamp", pa.array([stamp * 1000] * count, pa.timestamp("us", tz="UTC"))
    )
