"""Delta's Change Data Feed in batch reads: ``option("readChangeFeed", "true")``.

With the table property ``delta.enableChangeDataFeed = true``, delta-rs records row changes:
MERGE, UPDATE and DELETE write ``_change_data`` files (``update_preimage`` /
``update_postimage`` / ``delete`` / ``insert`` rows), and a commit without them (an append by
lakefeed's or delta-rs's writer, an overwrite) is read as ``insert`` for the files it adds and
``delete`` for the files it removes — Delta's rule. Reads go through delta-rs's ``load_cdf``,
which resolves versions, timestamps and the per-commit files, and returns Arrow; the batches
become one Spark DataFrame on the driver (an Arrow hand-over, no Python rows), with the table's
columns plus ``_change_type``, ``_commit_version`` (long) and ``_commit_timestamp`` (timestamp,
UTC) as Delta documents.

Options, as Delta's: ``startingVersion`` or ``startingTimestamp`` (one is required),
``endingVersion`` / ``endingTimestamp`` (default: the latest version). A range touching a
version written while the feed was off is refused (delta-rs checks it).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError as RsDeltaError
from pyspark.sql import DataFrame, SparkSession

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


def refuse_stream(options: Mapping[str, str]) -> None:
    """Streaming change feed reads are not served yet: refuse rather than stream plain rows."""
    if requested(options):
        raise ChangeFeedError(
            "readChangeFeed in a streaming read is not supported by lakefeed yet",
            fix="read the change feed in batch (spark.read) with startingVersion/endingVersion",
        )


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
    arrays = [changes.column(f.name).cast(f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)
