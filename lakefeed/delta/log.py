"""Reading a Delta table's transaction log for a change feed, Spark-free.

Commits come from ``_delta_log/<version>.json``; the starting snapshot comes from delta-rs, which
reads checkpoints, so a stream can start (or restart) on a table whose old JSON commits were
cleaned up. Each ``add`` keeps its deletion vector (:mod:`.dv`) and its partition values as
the log writes them (by physical name under column mapping, :mod:`.mapping`): readers apply
both. A table needing a reader feature lakefeed does not implement is refused, naming it
(:data:`READER_FEATURES`), before any row is read.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, Schema
from deltalake.exceptions import DeltaError as RsDeltaError

from lakefeed.core import storage
from lakefeed.delta import dv, mapping
from lakefeed.delta.errors import READER_FEATURE, DeltaSourceError
from lakefeed.delta.schema import as_nullable, table_arrow_schema

LOG_DIR = "_delta_log"


_UNSUPPORTED = re.compile(r"Feature '([^']+)' is not supported")
"""delta-rs's refusal to open a table with a feature it does not know."""
READ = {
    "deletionVectors": "inline and on-disk; batch, stream and time travel, in Spark's Parquet "
    "scan (`_metadata.row_index`) and in the Python reader; the change data feed too",
    "columnMapping": "modes `name` and `id` (nested fields too), the change data feed too; a "
    "stream stops on a rename or drop, also when restarted after one "
    "(`DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE`)",
    "timestampNtz": "as Spark's `TIMESTAMP_NTZ`",
    "v2Checkpoint": "JSON and Parquet v2 checkpoints with sidecars (delta-rs replays the log)",
    "vacuumProtocolCheck": "nothing to do for a reader",
}
"""Reader features lakefeed's readers implement, with what that covers (the table of
docs/delta-compatibility.md is rendered from it by :func:`feature_table`)."""
READER_FEATURES = frozenset(READ)
"""A table needing any other reader feature is refused before a row is read."""
PLAIN_PARQUET = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})
"""Reader features under which a table's rows are still just its Parquet files' rows (what
readers that hand files to other engines, such as manifests, need)."""


@dataclass(frozen=True)
class DataFile:
    """A data file the log adds: enough for a task to read it."""

    path: str
    size: int
    # By logical column name; read_commit leaves them keyed as the log writes them (physical
    # names under column mapping) and the change feed renames them (mapping.py).
    partition_values: dict[str, str | None]
    modification_time: int = 0
    deletes: dv.Deletes | None = None  # its deletion vector: rows to skip


@dataclass
class Commit:
    """The parts of one commit a change feed cares about."""

    version: int
    timestamp: int = 0
    adds: list[DataFile] = field(default_factory=list)  # data-changing adds, in log order
    data_removes: int = 0  # data-changing removes (deletes, updates, overwrites)
    schema: pa.Schema | None = None  # set when the commit changes the table's metadata
    mapping: mapping.ColumnMapping | None = None  # the new metadata's column mapping
    reader_features: frozenset[str] | None = None  # set when the commit changes the protocol


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
                    dv.Descriptor.from_json(add.get("deletionVector")),
                )
            )
        elif "remove" in action and action["remove"].get("dataChange", True):
            commit.data_removes += 1
        elif "metaData" in action:
            meta = action["metaData"]
            commit.schema = _schema_from_json(meta["schemaString"])
            commit.mapping = mapping.from_schema(
                meta["schemaString"], meta.get("configuration") or {}
            )
        elif "protocol" in action:
            commit.reader_features = needed_features(action["protocol"])
        elif "commitInfo" in action:
            commit.timestamp = int(action["commitInfo"].get("timestamp") or 0)
    return commit


def _schema_from_json(text: str) -> pa.Schema:
    return as_nullable(table_arrow_schema(Schema.from_json(text)))


def needed_features(protocol: Any) -> frozenset[str]:
    """The reader features a ``protocol`` (delta-rs's, or the log's JSON action) requires; a
    legacy reader version 2 means column mapping, a version past 3 is a feature of its own."""
    get = protocol.get if isinstance(protocol, dict) else lambda k: getattr(protocol, _snake(k))
    version = int(get("minReaderVersion") or 1)
    features = set(get("readerFeatures") or [])
    if version == 2:
        features.add("columnMapping")
    if version > 3:
        features.add(f"readerVersion{version}")
    return frozenset(features)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def check_readable(
    table: DeltaTable, root: str, supported: frozenset[str] = READER_FEATURES, reader: str = ""
) -> None:
    """Refuse a table needing a reader feature outside ``supported`` (``reader`` names the
    read that cannot serve it, when it is narrower than a table read)."""
    refuse_features(needed_features(table.protocol()), root, supported, reader)


def refuse_features(
    needed: frozenset[str], root: str, supported: frozenset[str] = READER_FEATURES, reader: str = ""
) -> None:
    """Refuse a table (or a commit's protocol) needing features outside ``supported``."""
    missing = sorted(needed - supported)
    if missing:
        raise DeltaSourceError(
            f"the Delta table {root} needs the reader feature{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)}, which {reader or 'lakefeed'} does not support: its Parquet "
            "files alone would give wrong rows",
            fix="read it with an engine that supports the feature, or rewrite it without the "
            "feature (docs/delta-compatibility.md lists what lakefeed reads)",
            code=READER_FEATURE,
        )


def feature_table() -> str:
    """The Markdown table of :data:`READ` (docs/delta-compatibility.md holds it; a test keeps
    them equal)."""
    rows = [f"| `{name}` | {what} |" for name, what in sorted(READ.items())]
    return "\n".join(["| Reader feature | Read |", "| --- | --- |", *rows])


def table_mapping(table: DeltaTable) -> mapping.ColumnMapping:
    """The column mapping of an open table (mode ``none`` when the protocol does not enable
    it, whatever the property says, as the protocol requires)."""
    config = dict(table.metadata().configuration)
    if "columnMapping" not in needed_features(table.protocol()):
        config.pop(mapping.MODE, None)
    return mapping.from_schema(table.schema().to_json(), config)


def rs_table(root: str, version: int | None = None) -> DeltaTable:
    """delta-rs's handle on the table at ``root``, with the S3 settings registered for that
    location (:func:`lakefeed.core.storage.delta_options`): every delta-rs open goes through
    here."""
    return DeltaTable(root, version=version, storage_options=storage.delta_options(root))


def open_table(root: str, version: int | None = None) -> DeltaTable:
    """A readable table handle, refusing clearly what is missing or unreadable."""
    if not is_delta_table(root):
        raise DeltaSourceError(
            f"{root} is not a Delta table (no _delta_log with commits). Write to it first, "
            "or check the path."
        )
    try:
        table = rs_table(root, version)
    except RsDeltaError as error:
        unsupported = _UNSUPPORTED.search(str(error))
        if unsupported is None:
            raise
        refuse_features(frozenset({unsupported.group(1)}), root)
        raise
    check_readable(table, root)
    return table


def file_deletes(table: DeltaTable, root: str) -> dict[str, dv.Deletes]:
    """The deleted rows of each file of a snapshot that has any, keyed by the file's location
    (:func:`dv.file_key` of :func:`files.local_path`); empty for a table without the feature."""
    if "deletionVectors" not in needed_features(table.protocol()):
        return {}
    return dict(dv.snapshot_deletes(pa.table(table.deletion_vectors())))


def commit_time(entry: dict[str, Any]) -> int:
    """When a commit (a ``history()`` entry) was made, in ms: its in-commit timestamp when the
    table has them (PROTOCOL.md, "In-Commit Timestamps": readers use it for time travel), else
    the writer's ``timestamp``."""
    stamp = entry.get("inCommitTimestamp")
    return int(entry["timestamp"] if stamp is None else stamp)


def version_at_timestamp(root: str, when: dt.datetime) -> int:
    """The first version committed at or after ``when`` (``startingTimestamp`` semantics)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    cutoff = int(when.timestamp() * 1000)
    newest = latest_version(root)
    if newest is None:
        raise DeltaSourceError(f"{root} is not a Delta table")
    for entry in sorted(rs_table(root).history(), key=lambda e: e["version"]):
        if commit_time(entry) >= cutoff:
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
