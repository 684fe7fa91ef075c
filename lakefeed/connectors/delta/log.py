"""Reading a Delta table's transaction log for a change feed, Spark-free.

Commits come from ``_delta_log/<version>.json``; the starting snapshot comes from delta-rs, which
reads checkpoints, so a stream can start (or restart) on a table whose old JSON commits were
cleaned up. Tables whose reader features need more than "read the Parquet files" are refused.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from lakefeed import storage
from lakefeed.connectors.delta.schema import as_nullable, table_arrow_schema
from lakefeed.errors import DeltaError, register_code

LOG_DIR = "_delta_log"


class DeltaSourceError(DeltaError):
    """A Delta table a stream cannot read as asked; the message says what to do."""

    code = "DELTA_SOURCE"


OTHER_TABLE = register_code("DELTA_SOURCE_OTHER_TABLE", DeltaSourceError)


@dataclass(frozen=True)
class DataFile:
    """A data file the log adds: enough for a task to read it."""

    path: str
    size: int
    partition_values: dict[str, str | None]
    modification_time: int = 0


@dataclass
class Commit:
    """The parts of one commit a change feed cares about."""

    version: int
    timestamp: int = 0
    adds: list[DataFile] = field(default_factory=list)  # data-changing adds, in log order
    data_removes: int = 0  # data-changing removes (deletes, updates, overwrites)
    schema: pa.Schema | None = None  # set when the commit changes the table's metadata


def commit_path(root: str, version: int) -> str:
    return storage.join(root, LOG_DIR, f"{version:020d}.json")


def is_delta_table(root: str) -> bool:
    return latest_version(root) is not None


def latest_version(root: str) -> int | None:
    """Newest committed version, from a listing of the log folder (cheap enough per trigger)."""
    newest: int | None = None
    for name in storage.list_names(storage.join(root, LOG_DIR)):
        stem = name.split(".", 1)[0]
        if stem.isdigit() and (name.endswith(".json") or ".checkpoint" in name):
            version = int(stem)
            newest = version if newest is None else max(newest, version)
    return newest


def commit_actions(root: str, version: int) -> list[dict[str, Any]] | None:
    """The actions of the commit at ``version``; None when its file is gone (log cleanup)."""
    try:
        text = storage.read_bytes(commit_path(root, version)).decode("utf-8")
    except FileNotFoundError:
        return None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def txn_commit(
    root: str, app_id: str, txn_version: int, scan: int = 200
) -> tuple[int, list[dict[str, Any]]] | None:
    """The table version whose commit carries ``txn(app_id, txn_version)``, with its actions,
    looked for among the newest ``scan`` JSON commits; None when not found there (or cleaned
    up)."""
    newest = latest_version(root)
    if newest is None:
        return None
    for version in range(newest, max(-1, newest - scan), -1):
        actions = commit_actions(root, version)
        if actions is None:
            return None
        for action in actions:
            txn = action.get("txn") or {}
            if txn.get("appId") == app_id and txn.get("version") == txn_version:
                return version, actions
    return None


def read_commit(root: str, version: int) -> Commit | None:
    """The commit at ``version``, or None when its JSON file is gone (log cleanup)."""
    actions = commit_actions(root, version)
    if actions is None:
        return None
    commit = Commit(version)
    for action in actions:
        if "add" in action and action["add"].get("dataChange", True):
            add = action["add"]
            commit.adds.append(
                DataFile(
                    add["path"],
                    int(add["size"]),
                    dict(add.get("partitionValues") or {}),
                    int(add.get("modificationTime") or 0),
                )
            )
        elif "remove" in action and action["remove"].get("dataChange", True):
            commit.data_removes += 1
        elif "metaData" in action:
            commit.schema = _schema_from_json(action["metaData"]["schemaString"])
        elif "commitInfo" in action:
            commit.timestamp = int(action["commitInfo"].get("timestamp") or 0)
    return commit


def _schema_from_json(text: str) -> pa.Schema:
    from deltalake import Schema

    return as_nullable(table_arrow_schema(Schema.from_json(text)))


def check_readable(table: DeltaTable, root: str) -> None:
    """Refuse tables whose rows are not simply "the rows of the Parquet files"."""
    protocol = table.protocol()
    features = set(protocol.reader_features or [])
    config = table.metadata().configuration
    if "deletionVectors" in features:
        raise DeltaSourceError(
            f"the Delta table {root} uses deletion vectors, which lakefeed cannot read yet. "
            "Purge them and turn them off with Spark+delta-spark: REORG TABLE ... APPLY (PURGE) "
            "and ALTER TABLE ... SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')."
        )
    mapping = config.get("delta.columnMapping.mode", "none")
    if "columnMapping" in features or (protocol.min_reader_version == 2 and mapping != "none"):
        raise DeltaSourceError(
            f"the Delta table {root} uses column mapping (mode {mapping!r}), which lakefeed "
            "cannot read yet: rewrite it into a table without column mapping."
        )
    unknown = features - {"deletionVectors", "columnMapping", "timestampNtz", "v2Checkpoint"}
    if unknown or protocol.min_reader_version > 3:
        raise DeltaSourceError(
            f"the Delta table {root} needs reader features lakefeed does not support: "
            f"{sorted(unknown) or protocol.min_reader_version}"
        )


def rs_table(root: str, version: int | None = None) -> DeltaTable:
    """delta-rs's handle on the table at ``root``, with the S3 settings registered for that
    location (:func:`lakefeed.storage.delta_options`): every delta-rs open goes through here."""
    return DeltaTable(root, version=version, storage_options=storage.delta_options(root))


def open_table(root: str, version: int | None = None) -> DeltaTable:
    """A readable table handle, refusing clearly what is missing or unreadable."""
    if not is_delta_table(root):
        raise DeltaSourceError(
            f"{root} is not a Delta table (no _delta_log with commits). Write to it first, "
            "or check the path."
        )
    table = rs_table(root, version)
    check_readable(table, root)
    return table


def snapshot_files(table: DeltaTable) -> list[DataFile]:
    """The files of a snapshot in Delta's streaming order (modification time, then path)."""
    actions = pa.table(table.get_add_actions(flatten=True))
    columns = [c for c in actions.column_names if c.startswith("partition.")]
    files = []
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    times = actions.column("modification_time").to_pylist()
    parts = [actions.column(c).to_pylist() for c in columns]
    for row, path in enumerate(paths):
        values = {
            c[len("partition.") :]: _partition_text(p[row])
            for c, p in zip(columns, parts, strict=True)
        }
        files.append(DataFile(path, int(sizes[row]), values, int(times[row] or 0)))
    files.sort(key=lambda f: (f.modification_time, f.path))
    return files


def _partition_text(value: Any) -> str | None:
    from lakefeed.connectors.delta.files import partition_string

    return partition_string(value)


def version_at_timestamp(root: str, when: dt.datetime) -> int:
    """The first version committed at or after ``when`` (``startingTimestamp`` semantics)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    cutoff = int(when.timestamp() * 1000)
    newest = latest_version(root)
    if newest is None:
        raise DeltaSourceError(f"{root} is not a Delta table")
    for entry in sorted(rs_table(root).history(), key=lambda e: e["version"]):
        if int(entry["timestamp"]) >= cutoff:
            return int(entry["version"])
    return newest + 1


def parse_timestamp(text: str) -> dt.datetime:
    """A user's timestamp option ('2024-01-01', '2024-01-01 10:00:00', ISO with zone)."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"cannot parse timestamp {text!r}: use ISO format like '2024-01-31 12:00:00'"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
