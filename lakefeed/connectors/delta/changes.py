"""Delta's Change Data Feed: ``option("readChangeFeed", "true")`` in batch and streaming reads.

With the table property ``delta.enableChangeDataFeed = true``, delta-rs records row changes:
MERGE, UPDATE and DELETE write ``_change_data`` files (``update_preimage`` /
``update_postimage`` / ``delete`` / ``insert`` rows), and a commit without them (an append by
lakefeed's or delta-rs's writer, an overwrite) is read as ``insert`` for the files it adds and
``delete`` for the files it removes — Delta's rule. Reads go through delta-rs's ``load_cdf``,
which resolves versions, timestamps and the per-commit files, and returns Arrow; the batches
become one Spark DataFrame on the driver (an Arrow hand-over, no Python rows), with the table's
columns plus ``_change_type``, ``_commit_version`` (long) and ``_commit_timestamp`` (timestamp,
UTC) as Delta documents.

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

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError as RsDeltaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lakefeed.connectors.delta import log
from lakefeed.connectors.delta.schema import as_nullable, table_arrow_schema
from lakefeed.errors import DeltaError

OPTION = "readChangeFeed"
CHANGE_COLUMNS = pa.schema(
    [
        pa.field("_change_type", pa.string()),
        pa.field("_commit_version", pa.int64()),
        pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC")),
    ]
)


class ChangeFeedError(DeltaError, ValueError):
    """A change feed read that cannot be served as asked."""

    code = "DELTA_CHANGE_DATA_FEED"


def requested(options: Mapping[str, str]) -> bool:
    from lakefeed.connectors.delta.datasource import flag

    return flag(options, OPTION)


def spark_schema(root: str) -> StructType:
    """The schema of a change feed read: the table's columns, then Delta's change columns."""
    from lakefeed.connectors.delta.datasource import spark_schema as table_schema

    columns = table_schema(log.open_table(root)).fields
    return StructType(columns + from_arrow_schema(CHANGE_COLUMNS).fields)


def batch_frame(spark: SparkSession, options: Mapping[str, str]) -> DataFrame:
    """The change rows of the requested version range as a Spark DataFrame."""
    from lakefeed.connectors.delta.datasource import table_root

    root = table_root(options)
    table = log.open_table(root)
    arrow = _load(table, root, options)
    columns = as_nullable(table_arrow_schema(table.schema()))
    return spark.createDataFrame(_conform(arrow, columns))


def _load(table: DeltaTable, root: str, options: Mapping[str, str]) -> pa.Table:
    from lakefeed.connectors.delta.datasource import option

    start_version = option(options, "startingVersion")
    start_time = option(options, "startingTimestamp")
    end_version = option(options, "endingVersion")
    end_time = option(options, "endingTimestamp")
    if (start_version is None) == (start_time is None):
        raise ChangeFeedError(
            f"a change feed read of {root} needs exactly one of startingVersion and "
            "startingTimestamp",
            fix='add .option("startingVersion", 0) (or a startingTimestamp)',
        )
    try:
        reader = table.load_cdf(
            starting_version=_version(start_version, "startingVersion") or 0,
            ending_version=_version(end_version, "endingVersion"),
            starting_timestamp=_timestamp(start_time),
            ending_timestamp=_timestamp(end_time),
        )
        return pa.table(reader)
    except RsDeltaError as error:
        raise ChangeFeedError(
            f"cannot read the change feed of {root}: {error}",
            fix="set the table property delta.enableChangeDataFeed=true before the changes "
            "you read, and start at or after the version that set it",
        ) from error


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


def _conform(changes: pa.Table, columns: pa.Schema) -> pa.Table:
    """The table's columns in their Delta types, then Delta's three change columns."""
    schema = pa.schema(list(columns) + list(CHANGE_COLUMNS))
    return _cast(changes, schema)


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


class ChangeFeedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``readStream.format("delta").option("readChangeFeed", "true")``; offsets are
    ``{"next": version to read next, "snapshot": version whose snapshot is unread, or -1}``."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        from lakefeed.connectors.delta.datasource import option, table_root

        self.root = table_root(options)
        self.schema = schema
        start = _version(option(options, "startingVersion"), "startingVersion")
        stamp = option(options, "startingTimestamp")
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
        target = to_arrow_schema(self.schema, timezone="UTC")
        if partition.snapshot:
            rows = _snapshot(self.root, partition.first)
        else:
            table = DeltaTable(self.root)
            rows = pa.table(
                table.load_cdf(starting_version=partition.first, ending_version=partition.last)
            )
        yield from _cast(rows, target).to_batches()

    def commit(self, end: dict) -> None:
        pass


def _snapshot(root: str, version: int) -> pa.Table:
    """The rows of ``version`` as that version's inserts."""
    table = DeltaTable(root, version=version)
    rows = pa.table(table.to_pyarrow_table())
    stamp = next((int(e["timestamp"]) for e in table.history() if int(e["version"]) == version), 0)
    count = rows.num_rows
    rows = rows.append_column("_change_type", pa.array(["insert"] * count, pa.string()))
    rows = rows.append_column("_commit_version", pa.array([version] * count, pa.int64()))
    return rows.append_column(
        "_commit_timestamp", pa.array([stamp * 1000] * count, pa.timestamp("us", tz="UTC"))
    )
