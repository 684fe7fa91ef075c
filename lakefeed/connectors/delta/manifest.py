"""Delta's symlink format manifests, Spark-free: what ``generate("symlink_format_manifest")``
writes so that engines without a Delta reader (Presto, Athena, Redshift Spectrum) read the
table's current files.

As Delta's ``GenerateSymlinkManifest``: ``<table>/_symlink_format_manifest/<partition path>/
manifest`` lists the absolute paths of the current data files of that partition (one manifest
at the folder's top for an unpartitioned table); manifests of partitions that no longer have
files are deleted. A full generation, on demand: lakefeed's writers do not refresh manifests
after each commit.
"""

from __future__ import annotations

import os

from lakefeed import storage
from lakefeed.connectors.delta import log
from lakefeed.connectors.delta.files import NULL_PARTITION, escape_path_name, local_path

MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST = "manifest"


def write_manifests(root: str) -> int:
    """Write the manifests of the table's current version; returns how many were written."""
    table = log.open_table(root)
    columns = list(table.metadata().partition_columns)
    groups: dict[str, list[str]] = {} if columns else {"": []}
    for file in log.snapshot_files(table):
        folder = "/".join(f"{c}={_folder_value(file.partition_values.get(c))}" for c in columns)
        groups.setdefault(folder, []).append(_absolute(local_path(root, file.path)))
    base = storage.join(root, MANIFEST_DIR)
    for folder, paths in groups.items():
        target = storage.join(base, folder, MANIFEST) if folder else storage.join(base, MANIFEST)
        if not storage.is_object_store(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
        storage.write_bytes(target, "".join(p + "\n" for p in sorted(paths)).encode())
    for stale in set(_existing(base)) - set(groups):
        storage.remove(
            storage.join(base, stale, MANIFEST) if stale else storage.join(base, MANIFEST)
        )
    return len(groups)


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
