"""Commits lakefeed writes itself, and the log replay they plan on, Spark-free.

delta-rs's Python API cannot commit an ``add`` or ``remove`` with a ``deletionVector``, nor a
schema change under column mapping, nor set properties without damaging a reader-3 protocol
(:mod:`.tblprops`), and does not hand out the deletion vectors of a snapshot's files. So
:mod:`.dv_write`, :mod:`.alter` and :mod:`.tblprops` write ``_delta_log/<version>.json``
through one function here, :func:`commit_actions`: every such commit carries one
``commitInfo`` shape (:func:`commit_info`, completed there with the engine, the read version,
the time and, where the table has them on, the in-commit timestamp), and is created exclusively
(a local file system's atomic create; on S3 a conditional PUT, as delta-rs's own commits there,
and a store that cannot is refused: :func:`lakefeed.core.storage.check_exclusive_creates`;
the callers ask before they write their files). A commit that lost the
race is checked against the winners with Delta's WriteSerializable rules (:func:`_check_winner`)
before it takes the next version.
:func:`replay_log` reads the ``add`` and ``remove`` actions as the log writes them: the newest
checkpoint (classic, multi-part, v2 with sidecars), then the JSON commits after it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from lakefeed.core import storage
from lakefeed.core.errors import ConflictError
from lakefeed.delta import files, log

ENGINE = "lakefeed"
ROW_TRACKING = "delta.rowTracking"
"""The domain holding a row-tracking table's ``rowIdHighWaterMark`` (PROTOCOL.md "Row
Tracking")."""
IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
"""The property that turns in-commit timestamps on (PROTOCOL.md, "In-Commit Timestamps")."""


def commit_info(
    operation: str,
    parameters: Mapping[str, Any],
    *,
    blind_append: bool = False,
    metrics: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The ``commitInfo`` action of a commit lakefeed writes itself: ``operation`` (as
    delta-spark names it, e.g. ``DELETE``, ``SET TBLPROPERTIES``) with its
    ``operationParameters`` and ``operationMetrics`` (values as text, as Delta writes them),
    whether it only adds files (``isBlindAppend``: concurrent writers need not conflict with
    it), and ``extra`` keys (a stream batch's source offsets, an ``isolationLevel``).
    :func:`commit_actions` adds the rest of the shape."""
    info: dict[str, Any] = {
        "operation": operation,
        "operationParameters": dict(parameters),
        "isBlindAppend": blind_append,
    }
    if metrics is not None:
        info["operationMetrics"] = {key: str(value) for key, value in metrics.items()}
    return {"commitInfo": {**info, **extra}}


def commit_actions(
    root: str,
    read_version: int,
    actions: list[dict[str, Any]],
    touched: set[str],
    app_id: str | None,
    *,
    rebase: bool = True,
    blind: bool = False,
    row_ids: bool = False,
) -> int:
    """Commit ``actions`` (one ``commitInfo``, then any ``protocol``, ``metaData``, ``txn``,
    ``remove`` and ``add``) made on ``read_version``, put-if-absent; the version committed.

    The commit takes the first free version after ``read_version`` whose earlier commits do
    not conflict with it (:func:`_check_winner`: ``touched`` are the files it removes,
    ``app_id`` its ``txn``'s; a ``blind`` change read no rows, so rows others added since do
    not conflict with it). ``row_ids``: the table has row tracking, so the files it adds get
    fresh row ids at the version taken (:func:`_with_row_ids`). With ``rebase=False`` any
    commit in between is a conflict: a change computed from the table's newest schema must be
    computed again."""
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), None)
    if info is None or len([a for a in actions if "commitInfo" in a]) != 1:
        raise ValueError("a Delta commit carries exactly one commitInfo action")
    others = [action for action in actions if "commitInfo" not in action]
    storage.check_exclusive_creates(root, f"the commit of {info.get('operation')} to {root}")
    previous = log.commit_actions(root, read_version) if read_version >= 0 else None
    version = read_version + 1
    while True:
        full = _complete(info, read_version, others, previous)
        body = _with_row_ids(root, version, others) if row_ids else others
        if storage.create_exclusive(log.commit_path(root, version), _payload([full, *body])):
            return version
        if not rebase:
            raise ConflictError(
                f"{info.get('operation', 'the change')} on {root} conflicted with another "
                f"commit of version {version}",
                fix="retry: the change is computed again from the table's newest version",
            )
        previous = _check_winner(root, version, touched, app_id, blind)
        version += 1


def _with_row_ids(root: str, version: int, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``actions`` committed as ``version`` of a row-tracking table: each ``add`` without a
    ``baseRowId`` (a new file; a file added back with a deletion vector keeps its own) gets
    the ids after the table's high water mark and ``defaultRowCommitVersion`` = ``version``,
    and the ``delta.rowTracking`` domain gets the new mark (PROTOCOL.md "Row Tracking")."""
    found = domain(root, version - 1, ROW_TRACKING) if version > 0 else None
    mark = int(json.loads(found)["rowIdHighWaterMark"]) if found else -1
    out, assigned = [], False
    for action in actions:
        add = action.get("add")
        if add is not None and add.get("baseRowId") is None:
            base = mark + 1
            mark += int(json.loads(add["stats"])["numRecords"])
            action = {"add": {**add, "baseRowId": base, "defaultRowCommitVersion": version}}
            assigned = True
        out.append(action)
    if assigned:
        configuration = json.dumps({"rowIdHighWaterMark": mark}, separators=(",", ":"))
        out.append(
            {
                "domainMetadata": {
                    "domain": ROW_TRACKING,
                    "configuration": configuration,
                    "removed": False,
                }
            }
        )
    return out


def _complete(
    info: dict[str, Any],
    read_version: int,
    others: list[dict[str, Any]],
    previous: list[dict[str, Any]] | None,
) -> dict[str, Any]:
    """``info`` with the keys every commit of lakefeed's carries: when (and, with in-commit
    timestamps on, the ``inCommitTimestamp``: later than the previous commit's, as the
    protocol requires), the version it read, the engine. Keys ``info`` has are kept."""
    now = files.now_ms()
    stamp: dict[str, Any] = {}
    if _in_commit_timestamps(others, previous):
        before = _info(previous).get("inCommitTimestamp")
        stamp["inCommitTimestamp"] = now if before is None else max(now, int(before) + 1)
    shape = {
        **stamp,
        "timestamp": now,
        "readVersion": read_version,
        "isolationLevel": "WriteSerializable",
        "isBlindAppend": False,
        "engineInfo": ENGINE,
        "engineInfo_lakefeed": ENGINE,
    }
    return {"commitInfo": {**shape, **info, **stamp}}


def _in_commit_timestamps(
    others: list[dict[str, Any]], previous: list[dict[str, Any]] | None
) -> bool:
    """Whether the table has in-commit timestamps on after this commit: as this commit's
    ``metaData`` sets them, else as the previous commit's did, else whether the previous
    commit carries one (every commit does while they are on)."""
    for actions in (others, previous or []):
        meta = next((a["metaData"] for a in actions if "metaData" in a), None)
        if meta is not None:
            setting = (meta.get("configuration") or {}).get(IN_COMMIT_TIMESTAMPS, "false")
            return str(setting).lower() == "true"
    return "inCommitTimestamp" in _info(previous)


def _info(actions: list[dict[str, Any]] | None) -> dict[str, Any]:
    return next((a["commitInfo"] for a in actions or [] if "commitInfo" in a), {})


def _payload(actions: list[dict[str, Any]]) -> bytes:
    """A commit file: one action a line, ``commitInfo`` first (in-commit timestamps need it)."""
    return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()


def metadata_action(
    table: DeltaTable,
    schema_string: str,
    configuration: dict[str, str],
    partition_columns: list[str],
) -> dict[str, Any]:
    """A ``metaData`` action keeping ``table``'s id, name, description and creation time, with
    the given schema (Delta's JSON), properties and partition columns."""
    meta = table.metadata()
    return {
        "metaData": {
            "id": meta.id,
            "name": meta.name,
            "description": meta.description,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": partition_columns,
            "configuration": configuration,
            "createdTime": meta.created_time,
        }
    }


def _check_winner(
    root: str, version: int, touched: set[str], app_id: str | None, blind: bool = False
) -> list[dict[str, Any]]:
    """Delta's conflict rules (WriteSerializable) for a change that removes ``touched``
    against the commit at ``version`` that won: a concurrent change of the protocol or the
    metadata, a removal of a file this change touched (two deletes of one file would lose one
    of them), files added by a commit that read the table (they may hold rows this change
    should have seen, unless this change is ``blind``), or the same ``txn`` app id all fail
    it; blind appends do not. The winner's actions, when none conflicts."""
    actions = log.commit_actions(root, version) or []
    info = _info(actions)
    harmless = blind or bool(info.get("isBlindAppend", _appends_only(info, actions)))
    for action in actions:
        why = _conflict(action, touched, app_id, harmless)
        if why:
            raise ConflictError(
                f"the change of {root} conflicted with the commit at version {version} "
                f"({info.get('operation', 'unknown')}): {why}",
                fix="retry: the change is planned again on the new version",
            )
    return actions


def _appends_only(info: dict[str, Any], actions: list[dict[str, Any]]) -> bool:
    """A commit without ``isBlindAppend`` (delta-rs writes none) counts as a blind append when
    it is a write that only adds files: lakefeed's appends and stream batches."""
    writes = info.get("operation") in ("WRITE", "STREAMING UPDATE")
    return writes and not any("remove" in action for action in actions)


def _conflict(
    action: dict[str, Any], touched: set[str], app_id: str | None, harmless_adds: bool
) -> str:
    if "metaData" in action or "protocol" in action:
        return "it changed the table's metadata or protocol"
    if "remove" in action and action["remove"]["path"] in touched:
        return f"it removed {action['remove']['path']}, which this change rewrites"
    if "add" in action and action["add"].get("dataChange", True) and not harmless_adds:
        return "it added rows after reading the table"
    if "txn" in action and app_id is not None and action["txn"].get("appId") == app_id:
        return f"it committed a transaction of the same application ({app_id})"
    return ""


# -- the live files with their deletion vectors -------------------------------------------


def live_files(root: str, version: int) -> dict[str, dict[str, Any]] | None:
    """The ``add`` actions of the table's files at ``version``, as the log writes them
    (delta-rs does not hand out their deletion vectors): :func:`replay`'s files."""
    replayed = replay_log(root, version)
    return None if replayed is None else replayed[0]


def replay_log(
    root: str, version: int
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]] | None:
    """The live ``add`` actions at ``version`` by path, and the ``remove`` actions (tombstones)
    the log still holds: the newest checkpoint at or before it (classic, multi-part, v2 with
    sidecars), then the JSON commits after it. None when a file of that replay is missing."""
    names = storage.list_names(storage.join(root, log.LOG_DIR))
    since, parts = _checkpoint(names, version)
    live: dict[str, dict[str, Any]] = {}
    tombstones: list[dict[str, Any]] = []
    try:
        for kind, action in _checkpoint_actions(root, parts):
            if kind == "add":
                live[action["path"]] = action
            else:
                tombstones.append(action)
        for at in range(since + 1, version + 1):
            actions = log.commit_actions(root, at)
            if actions is None:
                return None
            for action in actions:  # a commit's removes, then its adds (one path may be both)
                if "remove" in action:
                    live.pop(action["remove"]["path"], None)
                    tombstones.append(action["remove"])
            for action in actions:
                if "add" in action:
                    live[action["add"]["path"]] = action["add"]
    except (FileNotFoundError, KeyError):
        return None
    return live, tombstones


def _checkpoint(names: Iterable[str], version: int) -> tuple[int, list[str]]:
    """The newest complete checkpoint at or before ``version``: its version and file names
    (``(-1, [])`` without one)."""
    found: dict[int, list[str]] = {}
    for name in names:
        stem, _, rest = name.partition(".")
        if stem.isdigit() and rest.startswith("checkpoint.") and int(stem) <= version:
            found.setdefault(int(stem), []).append(name)
    for at in sorted(found, reverse=True):
        parts = sorted(found[at])
        multi = [p for p in parts if len(p.split(".")) == 5]  # <v>.checkpoint.<i>.<n>.parquet
        if multi and len(multi) == int(multi[0].split(".")[3]):
            return at, multi
        if not multi:
            return at, parts[:1]
    return -1, []


def domain(root: str, version: int, name: str) -> str | None:
    """The ``configuration`` of domain ``name`` (``domainMetadata``) at ``version``; None
    when the table has none (or it was removed)."""
    names = storage.list_names(storage.join(root, log.LOG_DIR))
    since, parts = _checkpoint(names, version)
    found: dict[str, Any] | None = None
    rows = [row for part in parts for row in _checkpoint_rows(root, part)]
    for at in range(since + 1, version + 1):
        rows += log.commit_actions(root, at) or []
    for row in rows:
        action = row.get("domainMetadata")
        if action and action.get("domain") == name:
            found = action
    return None if found is None or found.get("removed") else found["configuration"]


def _checkpoint_rows(root: str, name: str) -> list[dict[str, Any]]:
    location = storage.join(root, log.LOG_DIR, name)
    return _json_rows(location) if name.endswith(".json") else _parquet_rows(location)


def _checkpoint_actions(root: str, parts: list[str]) -> Iterable[tuple[str, dict[str, Any]]]:
    for name in parts:
        for row in _checkpoint_rows(root, name):
            yield from _file_actions(row)
            if row.get("sidecar"):
                sidecar = storage.join(root, log.LOG_DIR, "_sidecars", row["sidecar"]["path"])
                for side in _parquet_rows(sidecar):
                    yield from _file_actions(side)


def _file_actions(row: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    for kind in ("add", "remove"):
        if row.get(kind):
            yield kind, _plain(row[kind])


def _json_rows(location: str) -> list[dict[str, Any]]:
    text = storage.read_bytes(location).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _parquet_rows(location: str) -> list[dict[str, Any]]:
    fs, path = storage.filesystem(location)
    table = pq.read_table(path, filesystem=fs)
    kinds = ("add", "remove", "sidecar", "domainMetadata")
    wanted = [name for name in kinds if name in table.column_names]
    return table.select(wanted).to_pylist()


def _plain(add: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's add as the JSON log writes it: maps as objects, no nulls, no parsed
    copies of the partition values and statistics."""
    out = {}
    for key, value in add.items():
        if value is None or key.endswith("_parsed"):
            continue
        if key in ("partitionValues", "tags") and isinstance(value, list):
            value = dict(value)
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if v is not None or key != "deletionVector"}
        out[key] = value
    return out


def same_files(table: DeltaTable, live: dict[str, dict[str, Any]]) -> bool:
    """The replay found the files delta-rs's snapshot has (else this DELETE leaves it to
    delta-rs)."""
    paths = pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()
    return set(paths) == set(live)
