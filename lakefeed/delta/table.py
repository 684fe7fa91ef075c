"""Delta table housekeeping without Spark: history, compaction, vacuum, emptiness, reset.

For pipelines (checkpoint guards, full refresh), the UI and ``lakefeed table ...``. Everything
goes through delta-rs, so it works while no SparkSession exists (and imports no pyspark).

Row counts come from the log's file statistics (``numRecords``), never from reading data, with
one rule everywhere: a file without the statistic makes the count unknown (``None``), not zero,
and a table whose count is unknown but that has files is taken to hold rows.

    from lakefeed.delta import table
    table.exists(path)                    # a _delta_log with at least one commit
    table.row_count(path)                 # 0 without a table, None when a file has no stats
    if table.is_empty(path): ...          # no table, or a table without rows
    table.history(path, limit=10)         # newest first
    table.optimize(path)                  # compact small files (streaming writes many)
    table.vacuum(path, dry_run=False)     # delete unreferenced files older than the retention
    table.truncate(path)                  # full refresh: a commit that removes every file
    table.describe(path, "raw readings", {"quality": "bronze"})  # COMMENT / TBLPROPERTIES
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from lakefeed.core import storage
from lakefeed.core.storage import Location
from lakefeed.delta import alter, dv_write, features, log, mapping, rewrite, tblprops
from lakefeed.delta.files import STAGING, now_ms, stale_staging
from lakefeed.delta.options import table_root

# Delta's default: files removed less than a week ago may still be read (time travel, streams).
DEFAULT_RETENTION_HOURS = 168


@dataclass(frozen=True)
class TableInfo:
    path: str
    version: int
    files: int
    rows: int | None
    size_bytes: int
    partition_columns: list[str]
    description: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


def exists(path: Location) -> bool:
    """Whether ``path`` holds a Delta table (a ``_delta_log`` with at least one commit)."""
    return log.is_delta_table(str(path))


def _open(path: Location) -> DeltaTable:
    if not exists(path):
        raise FileNotFoundError(f"{path} is not a Delta table (no _delta_log with commits)")
    return log.rs_table(str(path))


def rows_of(actions: pa.Table) -> int | None:
    """Rows of a snapshot from its add actions (``get_add_actions(flatten=True)``): the sum of
    ``num_records``, or None when any file lacks that statistic."""
    if actions.num_rows == 0:
        return 0
    if "num_records" not in actions.column_names:
        return None
    records = actions.column("num_records")
    return None if records.null_count else int(pc.sum(records).as_py() or 0)


def deleted_rows(handle: DeltaTable) -> int:
    """Rows of the snapshot's files that their deletion vectors delete (0 without the
    feature): ``num_records`` counts them, a reader does not return them."""
    if "deletionVectors" not in log.needed_features(handle.protocol()):
        return 0
    kept = pc.list_flatten(pa.table(handle.deletion_vectors()).column("selection_vector"))
    return len(kept) - int(pc.sum(kept.cast(pa.int64())).as_py() or 0)


def live_rows(handle: DeltaTable) -> int | None:
    """Rows a reader of the snapshot sees: :func:`rows_of` less :func:`deleted_rows`."""
    records = rows_of(pa.table(handle.get_add_actions(flatten=True)))
    return None if records is None else records - deleted_rows(handle)


def row_count(path: Location) -> int | None:
    """Rows in the table's current version (0 when there is no table; see :func:`live_rows`)."""
    if not exists(path):
        return 0
    return live_rows(log.rs_table(str(path)))


def has_rows(path: Location) -> bool:
    """Whether the table holds rows: an unknown count with files counts as rows."""
    rows = row_count(path)
    return rows is None or rows > 0


def is_empty(path: Location) -> bool:
    """True when there is no table at ``path`` or its current version holds no rows."""
    return not has_rows(path)


def info(path: Location) -> TableInfo:
    handle = _open(path)
    actions = pa.table(handle.get_add_actions(flatten=True))
    metadata = handle.metadata()
    return TableInfo(
        path=str(path),
        version=handle.version(),
        files=actions.num_rows,
        rows=live_rows(handle),
        size_bytes=(pc.sum(actions.column("size_bytes")).as_py() or 0) if actions.num_rows else 0,
        partition_columns=list(metadata.partition_columns),
        description=metadata.description or None,
        properties=dict(metadata.configuration),
    )


def describe(path: Location, description: str | None, properties: dict[str, str]) -> bool:
    """Give the table at ``path`` this description and these properties (Delta's
    ``metaData.description`` and ``configuration``, what ``COMMENT`` and ``TBLPROPERTIES`` set).

    Commits only what differs, so a pipeline applying its declaration on every run adds no
    versions once the table matches. Properties set by others stay, as ``SET TBLPROPERTIES``
    leaves them. Returns whether anything was committed.
    """
    handle = _open(path)
    metadata = handle.metadata()
    changed = {k: v for k, v in properties.items() if metadata.configuration.get(k) != v}
    mode = next((k for k in changed if k.lower() == mapping.MODE.lower()), None)
    mapped = False
    if mode is not None:  # delta-rs cannot turn column mapping on: a commit of lakefeed's
        mapped = alter.enable_column_mapping(str(path), changed.pop(mode)) is not None
        handle = _open(path)
    if changed:
        if tblprops.needed(handle, changed):  # where delta-rs's commit would hurt the protocol
            tblprops.set_properties(str(path), handle, changed)
        else:  # Spark's Delta takes any key outside ``delta.``; delta-rs checks only known keys.
            handle.alter.set_table_properties(changed, raise_if_not_exists=False)
    redescribe = description is not None and description != (metadata.description or None)
    if description is not None and redescribe:
        handle.alter.set_table_description(description)
    return bool(changed) or redescribe or mapped


def rows_added(path: Location, after_version: int | None) -> int:
    """Rows of the data files committed after ``after_version`` (None: since the table began),
    from the ``numRecords`` statistics of their ``add`` actions; no data file is read.

    A commit whose JSON was cleaned up already counts for nothing.
    """
    newest = log.latest_version(str(path))
    if newest is None:
        return 0
    first = 0 if after_version is None else after_version + 1
    return sum(_commit_rows(str(path), version) for version in range(first, newest + 1))


def _commit_rows(root: str, version: int) -> int:
    rows = 0
    for action in log.commit_actions(root, version) or []:
        add = action.get("add")
        if add and add.get("dataChange", True) and add.get("stats"):
            rows += int(json.loads(add["stats"]).get("numRecords") or 0)
    return rows


def version(path: Location) -> int | None:
    """The table's newest version, or None when there is no table."""
    return log.latest_version(str(path))


def history(path: Location, limit: int | None = None) -> list[dict[str, Any]]:
    """Commits, newest first: version, timestamp (UTC datetime), operation, parameters, metrics."""
    entries = sorted(_open(path).history(limit), key=lambda e: -int(e["version"]))
    for entry in entries:  # the in-commit timestamp where the table has them, as Delta's
        entry["timestamp"] = dt.datetime.fromtimestamp(log.commit_time(entry) / 1000, dt.UTC)
    return entries


def optimize(
    path: Location, target_size: int | None = None, partition_filters: list | None = None
) -> dict[str, Any]:
    """Compact small files into bigger ones (a dataChange=false commit streams skip): by
    delta-rs, or lakefeed's own compaction where delta-rs refuses the table
    (:func:`.rewrite.own`: column mapping, clustered and managed tables)."""
    table = _open(path)
    if rewrite.own(table):
        done = rewrite.compact(table, str(path), partition_filters, None, target_size)
        if done is not None:
            return done
        features.check_writable(table, str(path), "OPTIMIZE")  # refused, naming the features
    return dict(
        table.optimize.compact(target_size=target_size, partition_filters=partition_filters)
    )


def vacuum(
    path: Location,
    retention_hours: float = DEFAULT_RETENTION_HOURS,
    dry_run: bool = True,
    force: bool = False,
) -> list[str]:
    """Files no version within the retention needs: listed (dry run) or deleted.

    Like Delta, a retention below the default is refused unless ``force``: a shorter one can
    delete files that running streams or time travel still read.
    """
    if retention_hours < DEFAULT_RETENTION_HOURS and not force:
        raise ValueError(
            f"retention of {retention_hours} h is below the safe default of "
            f"{DEFAULT_RETENTION_HOURS} h: readers (streams, time travel) may still need those "
            "files. Pass force=True (CLI: --force) if nothing reads older versions."
        )
    files = list(
        _open(path).vacuum(
            retention_hours=int(retention_hours),
            dry_run=dry_run,
            enforce_retention_duration=False,
        )
    )
    # delta-rs skips folders whose names start with "_": the staging of writes that died.
    staged = stale_staging(str(path), retention_hours * 3600)
    # delta-rs keeps every deletion vector file: those no file needs any more go too.
    vectors = dv_write.stale_vectors(str(path), int(retention_hours * 3_600_000), now_ms())
    if not dry_run:
        for folder in staged:
            storage.remove_tree(folder)
        for vector in vectors or []:
            storage.remove(storage.join(str(path), vector))
    return (
        files
        + (vectors or [])
        + [f"{STAGING}/{storage.as_path(folder).name}/" for folder in staged]
    )


def truncate(path: Location) -> int | None:
    """Remove every row in one commit (full refresh), keeping schema and history.

    Returns the new version, or None when there is no table (nothing to reset).
    """
    if not exists(path):
        return None
    handle = _open(path)
    handle.delete()
    return log.rs_table(str(path)).version()


def presence(path: str) -> tuple[bool, str]:
    """Whether a Delta table is at ``path`` (local or object storage, as ``format("delta")``
    reads it), and what is there: its version, or what is found instead and the fix (what
    ``validate --check-connections`` shows)."""
    where = table_root({"path": path})
    version = log.latest_version(where)
    if version is not None:
        return True, f"table at version {version}"
    there = storage.exists(where)
    fix = "check the path, or create the table first" if there else "check the path"
    found = "a folder without _delta_log" if there else "nothing"
    return False, f"no Delta table at {path} ({found} there): {fix}"
