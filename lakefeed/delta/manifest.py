"""Delta's symlink format manifests, Spark-free: what engines without a Delta reader (Presto,
Trino, Athena, Redshift Spectrum) read to find the table's current files.

As Delta's ``GenerateSymlinkManifest``: ``<table>/_symlink_format_manifest/<partition path>/
manifest`` lists the absolute paths of the current data files of that partition (one manifest
at the folder's top for an unpartitioned table); manifests of partitions that no longer have
files are deleted. :func:`write_manifests` is the full generation of
``generate("symlink_format_manifest")``. With the table property
``delta.compatibility.symlinkFormatManifest.enabled = true``, every lakefeed commit that adds
or removes files (writes, streams, merge/update/delete, optimize, auto compaction, restore, a
replace) is followed by :func:`after_commit`, Delta's post-commit hook: only the partitions the
new commits touched are rewritten (all of them when there are no manifests yet; as in Delta,
turning the property on writes nothing by itself: run ``generate`` then). It never fails the
commit, which is already done: a failed refresh is logged as a warning and leaves a marker
(``_lakefeed_stale``, hidden from Hive-style readers by its ``_``) that makes the next commit
regenerate every manifest (as ``generate`` does at once).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Mapping

from deltalake import DeltaTable

from lakefeed.core import storage
from lakefeed.delta import log, pruning
from lakefeed.delta.files import NULL_PARTITION, escape_path_name, local_path

MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST = "manifest"
ENABLED = "delta.compatibility.symlinkFormatManifest.enabled"
STALE = "_lakefeed_stale"
"""Left in the manifest folder by a failed refresh: the next one regenerates all manifests."""

_log = logging.getLogger("lakefeed.delta.manifest")


def enabled(configuration: Mapping[str, str]) -> bool:
    """Whether the table's properties ask for manifests kept fresh (keys in any case)."""
    value = next((v for k, v in configuration.items() if k.lower() == ENABLED.lower()), "")
    return str(value).strip().lower() == "true"


def after_commit(
    root: str,
    configuration: Mapping[str, str],
    since: int,
    latest: Callable[[], DeltaTable | None] | None = None,
) -> None:
    """Delta's post-commit hook: refresh the manifests of the partitions that the commits after
    version ``since`` touched, when the table's ``configuration`` enables it. Never raises.
    ``latest``: the writer's own handle brought up to date (a stream's kept snapshot: its next
    batch then finds nothing new to read), else the table is opened afresh."""
    if not enabled(configuration):
        return
    try:
        refresh(root, since, latest() if latest is not None else None)
    except Exception as error:  # noqa: BLE001 - the commit stands; the next one repairs this
        _log.warning(
            "symlink format manifests not refreshed after a commit: the next commit (or "
            "DeltaTable.generate('symlink_format_manifest')) regenerates them",
            extra={"table": root, "since_version": since, "error": str(error)},
        )
        with contextlib.suppress(Exception):  # storage down: already logged above
            _put(storage.join(root, MANIFEST_DIR, STALE), b"")


def refresh(root: str, since: int, table: DeltaTable | None = None) -> int:
    """Rewrite the manifests of the partitions touched after version ``since`` (every one when
    the folder has none, or a failed refresh left its marker); returns how many were written.
    Commits that add or remove no file (a property or schema change) change nothing, as Delta
    registers its hook only for those that do. ``table``: the table at its newest version, else
    opened here."""
    table = table or log.rs_table(root)  # just committed to: no need to look for the log first
    # As Delta's hook, refuse what a manifest cannot describe (deleted rows, mapped columns).
    log.check_readable(table, root, log.PLAIN_PARQUET, "a symlink manifest")
    touched = _touched(root, table, since)
    if touched is not None and not touched:
        return 0
    present = storage.list_names(storage.join(root, MANIFEST_DIR))
    return write_manifests(root, table, touched if present and STALE not in present else None)


def write_manifests(
    root: str, table: DeltaTable | None = None, partitions: set[str] | None = None
) -> int:
    """Write the manifests of the table's current version (``partitions``: only those folders,
    ``a=1/b=x``; None: all, and any stale marker goes); returns how many were written."""
    table = table or log.open_table(root)
    log.check_readable(table, root, log.PLAIN_PARQUET, "a symlink manifest")
    columns = list(table.metadata().partition_columns)
    groups: dict[str, list[str]] = {} if columns else {"": []}
    for file in pruning.snapshot_files(table, root):
        folder = _folder(columns, file.partition_values)
        if partitions is None or folder in partitions:
            groups.setdefault(folder, []).append(_absolute(local_path(root, file.path)))
    base = storage.join(root, MANIFEST_DIR)
    for folder, paths in groups.items():
        _put(_manifest(base, folder), "".join(p + "\n" for p in sorted(paths)).encode())
    emptied = set(_existing(base)) if partitions is None else partitions
    for stale in emptied - set(groups):
        storage.remove(_manifest(base, stale))
    if partitions is None:
        storage.remove(storage.join(base, STALE))
    return len(groups)


def _touched(root: str, table: DeltaTable, since: int) -> set[str] | None:
    """Partition folders (``""`` unpartitioned) that the commits after ``since`` added or
    removed files in; None when that cannot be told (a commit file gone, a remove without
    partition values)."""
    columns = list(table.metadata().partition_columns)
    touched: set[str] = set()
    for version in range(since + 1, table.version() + 1):
        actions = log.commit_actions(root, version)
        if actions is None:
            return None
        for action in _file_actions(actions):
            values = action.get("partitionValues")
            if values is None and columns:
                return None
            touched.add(_folder(columns, values or {}))
    return touched


def _file_actions(actions: Iterable[dict]) -> Iterable[dict]:
    for action in actions:
        for kind in ("add", "remove"):
            if kind in action:
                yield action[kind]


def _folder(columns: list[str], values: Mapping[str, str | None]) -> str:
    return "/".join(f"{c}={_folder_value(values.get(c))}" for c in columns)


def _put(target: str, data: bytes) -> None:
    if not storage.is_object_store(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
    storage.write_bytes(target, data)


def _manifest(base: str, folder: str) -> str:
    return storage.join(base, folder, MANIFEST) if folder else storage.join(base, MANIFEST)


def _folder_value(value: str | None) -> str:
    return NULL_PARTITION if value is None else escape_path_name(value)


def _absolute(path: str) -> str:
    """A data file as Delta's manifests name it: a qualified URI (``file:/...`` locally)."""
    return path if storage.is_object_store(path) else "file:" + os.path.abspath(path)


def _existing(base: str) -> list[str]:
    """Partition folders (relative, ``""`` for the top) that hold a manifest now."""
    return [
        name.rsplit("/", 1)[0] if "/" in name else ""
        for name in storage.files_under(base)
        if name == MANIFEST or name.endswith("/" + MANIFEST)
    ]
