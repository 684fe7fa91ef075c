"""Symlink format manifests (``generate("symlink_format_manifest")``), Spark-free."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from lakefeed.connectors.delta.manifest import write_manifests


def _manifest(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_manifests_per_partition_absolute_paths_and_stale_ones_deleted(tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows = pa.table({"v": [1, 2, 3], "p": ["a", "b", None]})
    write_deltalake(str(root), rows, partition_by=["p"])
    assert write_manifests(str(root)) == 3
    base = root / "_symlink_format_manifest"
    files = {
        f"file:{root}/{a['path']}"
        for a in pa.table(DeltaTable(str(root)).get_add_actions(True)).to_pylist()
    }
    written = {line for folder in ("p=a", "p=b", "p=__HIVE_DEFAULT_PARTITION__")
               for line in _manifest(base / folder / "manifest")}  # fmt: skip
    assert written == files
    assert all(Path(line.removeprefix("file:")).exists() for line in written)

    write_deltalake(
        str(root), pa.table({"v": [4], "p": ["a"]}), partition_by=["p"], mode="overwrite"
    )
    assert write_manifests(str(root)) == 1
    assert sorted(p.parent.name for p in base.rglob("manifest")) == ["p=a"]
    assert len(_manifest(base / "p=a" / "manifest")) == 1


def test_unpartitioned_and_empty_tables_get_one_manifest(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"v": [1]}))
    write_manifests(str(root))
    assert len(_manifest(root / "_symlink_format_manifest" / "manifest")) == 1
    DeltaTable(str(root)).delete()
    write_manifests(str(root))
    assert _manifest(root / "_symlink_format_manifest" / "manifest") == []
