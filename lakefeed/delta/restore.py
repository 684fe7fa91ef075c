"""RESTORE that lakefeed commits itself, Spark-free: for tables whose writer features delta-rs
refuses (:data:`.features.OWN_COMMIT`: domain metadata, clustering, in-commit timestamps, row
tracking), where delta-rs's RESTORE cannot commit.

As delta-spark's RESTORE, one commit makes the files of the target version the table's again:
a file of the target version that is not live now (by path and deletion vector) is added back
as the target version had it (its statistics, deletion vector, row ids and clustering kept),
and a live file the target version lacks is removed, both with ``dataChange=true``. The
target's ``metaData`` comes back where it differs (with the in-commit timestamp settings of
now: a restore does not turn them off), the protocol stays (a restore never downgrades it;
a target whose protocol has a feature the table no longer lists is refused), and the domains
stay as they are now except the clustering domain, which takes the target's clustering
columns (none, where the target was not clustered): delta-spark's rule for domain metadata on
RESTORE. The commit gets an in-commit timestamp where they are on; a file added back without
row ids gets fresh ones where the table tracks rows. Another commit that added or removed
files since the restore read the table fails it (retry), as delta-spark's RESTORE.

On object storage, or where the log replay here does not find delta-rs's files, nothing is
written (:func:`restore` answers None and the caller refuses).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from deltalake import DeltaTable

from lakefeed.core import storage
from lakefeed.delta import clustering, dv_write, features, files, identity, log, log_writer
from lakefeed.delta.errors import CANNOT_RESTORE, DeltaOperationError

KEPT_SETTINGS = (
    log_writer.IN_COMMIT_TIMESTAMPS,
    "delta.inCommitTimestampEnablementVersion",
    "delta.inCommitTimestampEnablementTimestamp",
)
"""Table properties a restore keeps as they are now (in-commit timestamps stay on)."""
Key = tuple[str, str | None]
"""A logical file: its path and its deletion vector's identity."""


def restore(
    table: DeltaTable, root: str, target: int, txn: dv_write.Marks | None
) -> dict[str, Any] | None:
    """Restore the table at ``root`` (``table``: its handle now) to version ``target`` in one
    commit (the module doc), with ``txn``; delta-rs's RESTORE metric names, or None where
    this cannot (nothing written)."""
    version = table.version()
    _check_target(root, target, version)
    live = None if storage.is_object_store(root) else dv_write.planned_files(table, root)
    old = None if live is None else log_writer.live_files(root, target)
    if live is None or old is None:
        return None
    now = files.now_ms()
    then = log.rs_table(root, target)
    now_files, then_files = _keyed(live.values()), _keyed(old.values())
    restored = [add for key, add in then_files.items() if key not in now_files]
    removed = [add for key, add in now_files.items() if key not in then_files]
    _check_present(root, target, restored)
    actions = [_info(target, now, live.values(), restored, removed)]
    actions += _changes(root, table, then, target)
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    actions += [{"remove": dv_write.remove_action(add, now)} for add in removed]
    actions += [{"add": {**add, "dataChange": True}} for add in restored]
    touched = {add["path"] for add in removed}
    row_ids = features.tracks_rows(table)
    log_writer.commit_actions(root, version, actions, touched, None, row_ids=row_ids)
    table.update_incremental()
    return {"numRemovedFile": len(removed), "numRestoredFile": len(restored)}


def _check_target(root: str, target: int, version: int) -> None:
    if not 0 <= target <= version:
        raise DeltaOperationError(
            f"Cannot restore the Delta table {root} to version {target}: available versions "
            f"are [0, {version}]",
            fix="restore to a version DESCRIBE HISTORY lists",
            code=CANNOT_RESTORE,
        )


def _keyed(adds: Iterable[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """The files by path and deletion vector (a file whose vector changed is another file)."""
    keyed: dict[Key, dict[str, Any]] = {}
    for add in adds:
        vector = add.get("deletionVector")
        identity = None if not vector else json.dumps(vector, sort_keys=True)
        keyed[(add["path"], identity)] = add
    return keyed


def _check_present(root: str, target: int, restored: list[dict[str, Any]]) -> None:
    """Refuse a restore whose files a vacuum deleted (delta-spark's check)."""
    missing = [
        add["path"] for add in restored if not storage.exists(files.local_path(root, add["path"]))
    ]
    if missing:
        raise DeltaOperationError(
            f"Cannot restore the Delta table {root} to version {target}: not all of its files "
            f"are in the file system (missing, first 10: {missing[:10]}); nothing was written",
            fix="restore a more recent version (a VACUUM deleted the files of this one)",
            code=CANNOT_RESTORE,
        )


def _changes(root: str, table: DeltaTable, then: DeltaTable, target: int) -> list[dict[str, Any]]:
    """The ``metaData`` and clustering domain the restore commits (the module doc)."""
    protocol, old_protocol = table.protocol(), then.protocol()
    lost = set(old_protocol.writer_features or []) - set(protocol.writer_features or [])
    if lost:
        raise DeltaOperationError(
            f"Cannot restore the Delta table {root} to version {target}: that version needs "
            f"the writer feature(s) {sorted(lost)}, which the table no longer lists, and "
            "lakefeed does not upgrade a protocol in a restore; nothing was written",
            fix="restore with delta-spark, or restore a later version",
            code=CANNOT_RESTORE,
        )
    actions = []
    meta = _metadata(table, then)
    if meta is not None:
        actions.append(meta)
    domain = _clustering_domain(root, table, then, target)
    if domain is not None:
        actions.append(domain)
    return actions


def _metadata(table: DeltaTable, then: DeltaTable) -> dict[str, Any] | None:
    """The target's ``metaData`` with today's in-commit timestamp settings, when it differs
    from the table's now."""
    now, old = table.metadata(), then.metadata()
    configuration = {k: v for k, v in old.configuration.items() if k not in KEPT_SETTINGS}
    configuration |= {k: v for k, v in now.configuration.items() if k in KEPT_SETTINGS}
    schema = identity.kept_marks(then.schema().to_json(), identity.of_schema(table.schema()))
    partitions = list(old.partition_columns)
    same = (
        schema == table.schema().to_json()
        and configuration == dict(now.configuration)
        and partitions == list(now.partition_columns)
    )
    return None if same else log_writer.metadata_action(then, schema, configuration, partitions)


def _clustering_domain(
    root: str, table: DeltaTable, then: DeltaTable, target: int
) -> dict[str, Any] | None:
    """The clustering domain with the target's columns, where the table has one now and its
    columns differ from the target's."""
    current = log_writer.domain(root, table.version(), clustering.DOMAIN)
    if current is None:
        return None
    wanted = log_writer.domain(root, target, clustering.DOMAIN)
    columns = json.loads(wanted or "{}").get("clusteringColumns") or []
    if json.loads(current).get("clusteringColumns") == columns:
        return None
    configuration = json.dumps({"clusteringColumns": columns}, separators=(",", ":"))
    action = {"domain": clustering.DOMAIN, "configuration": configuration, "removed": False}
    return {"domainMetadata": action}


def _info(
    target: int,
    now: int,
    live: Iterable[dict[str, Any]],
    restored: list[dict[str, Any]],
    removed: list[dict[str, Any]],
) -> dict[str, Any]:
    """RESTORE's ``commitInfo`` with delta-spark's parameters and metrics."""
    removed_paths = {add["path"] for add in removed}
    after = [a for a in live if a["path"] not in removed_paths] + restored
    metrics = {
        "tableSizeAfterRestore": sum(int(a["size"]) for a in after),
        "numOfFilesAfterRestore": len(after),
        "numRemovedFiles": len(removed),
        "numRestoredFiles": len(restored),
        "removedFilesSize": sum(int(a["size"]) for a in removed),
        "restoredFilesSize": sum(int(a["size"]) for a in restored),
    }
    return log_writer.commit_info(
        "RESTORE", {"version": target, "timestamp": None}, metrics=metrics, timestamp=now
    )
