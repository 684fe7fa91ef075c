"""Symlink format manifests: ``generate("symlink_format_manifest")`` and Delta's post-commit
hook (``delta.compatibility.symlinkFormatManifest.enabled``), Spark-free, then through
lakefeed's Spark writes and ``DeltaTable`` operations."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.delta import manifest
from lakefeed.delta.manifest import write_manifests
from lakefeed.delta.table import describe

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


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


def _manifests(root: Path) -> dict[str, list[str]]:
    """Partition folder -> the manifest's lines."""
    base = root / "_symlink_format_manifest"
    return {str(p.parent.relative_to(base)): _manifest(p) for p in sorted(base.rglob("manifest"))}


def _current(root: Path) -> dict[str, list[str]]:
    """What the manifests must say: the table's files by partition folder."""
    table = DeltaTable(str(root))
    columns = table.metadata().partition_columns
    found: dict[str, list[str]] = {}
    for add in pa.table(table.get_add_actions(True)).to_pylist():
        folder = "/".join(f"{c}={add[f'partition.{c}']}" for c in columns) or "."
        found.setdefault(folder, []).append(f"file:{root}/{add['path']}")
    return {k: sorted(v) for k, v in found.items()}


def test_after_commit_refreshes_touched_partitions_and_repairs_after_a_failure(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    root = tmp_path / "t"
    on = {manifest.ENABLED: "true"}
    rows = pa.table({"v": [1, 2], "p": ["a", "b"]})
    DeltaTable.create(
        str(root), rows.schema, partition_by=["p"], configuration=on, raise_if_key_not_exists=False
    )
    write_deltalake(str(root), rows, mode="append")
    manifest.after_commit(str(root), on, 0)  # no manifests yet: all of them
    assert _manifests(root) == _current(root)

    (root / "_symlink_format_manifest" / "p=b" / "manifest").unlink()
    write_deltalake(str(root), pa.table({"v": [3], "p": ["a"]}), mode="append")
    manifest.after_commit(str(root), on, 1)  # version 2 touched p=a only
    assert _manifests(root) == {"p=a": _current(root)["p=a"]}
    DeltaTable(str(root)).delete("p = 'a'")
    manifest.after_commit(str(root), on, 2)
    assert _manifests(root) == {}  # p=a's manifest went with its files

    # a failed refresh never raises: it warns and leaves a marker; the next one regenerates all
    def broken(*args, **kwargs):
        raise OSError("store down")

    monkeypatch.setattr(manifest, "write_manifests", broken)
    write_deltalake(str(root), pa.table({"v": [4], "p": ["c"]}), mode="append")
    with caplog.at_level("WARNING", logger="lakefeed.delta.manifest"):
        manifest.after_commit(str(root), on, 3)
    (record,) = caplog.records
    assert (record.table, record.error) == (str(root), "store down")  # type: ignore[attr-defined]
    assert (root / "_symlink_format_manifest" / manifest.STALE).exists()
    monkeypatch.undo()
    write_deltalake(str(root), pa.table({"v": [5], "p": ["c"]}), mode="append")
    manifest.after_commit(str(root), on, 4)
    assert _manifests(root) == _current(root) and set(_current(root)) == {"p=b", "p=c"}
    assert not (root / "_symlink_format_manifest" / manifest.STALE).exists()

    # off (or not set): nothing is written
    other = tmp_path / "off"
    write_deltalake(str(other), rows)
    manifest.after_commit(str(other), {manifest.ENABLED: "false"}, -1)
    manifest.after_commit(str(other), {}, -1)
    assert not (other / "_symlink_format_manifest").exists()
    # as in Delta, turning it on (a pipeline's TBLPROPERTIES) commits no file: no manifests
    # until the next commit that adds or removes files, which writes them all
    describe(str(other), None, {manifest.ENABLED: "true"})
    manifest.after_commit(str(other), on, 0)
    assert not (other / "_symlink_format_manifest").exists()
    write_deltalake(str(other), rows, mode="append")
    manifest.after_commit(str(other), on, 1)
    assert _manifests(other) == _current(other)


def test_spark_writes_streams_and_operations_keep_manifests_fresh(spark, tmp_path: Path) -> None:
    from lakefeed.compat.delta_spark import DeltaTable as SparkTable

    path = str(tmp_path / "t")
    SparkTable.create(spark).location(path).addColumn("id", "INT").addColumn(
        "p", "STRING"
    ).partitionedBy("p").property(manifest.ENABLED, "true").execute()
    rows = spark.createDataFrame([(1, "a"), (2, "b"), (3, "b")], "id int, p string")
    rows.write.format("delta").mode("append").save(path)  # batch
    assert _manifests(tmp_path / "t") == _current(tmp_path / "t")
    rows.where("p = 'b'").write.format("delta").mode("append").save(path)

    landing = tmp_path / "landing"
    spark.createDataFrame([(4, "c")], "id int, p string").write.parquet(str(landing))
    spark.readStream.schema("id int, p string").parquet(str(landing)).writeStream.format(
        "delta"
    ).option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start(
        path
    ).awaitTermination()  # stream
    assert set(_manifests(tmp_path / "t")) == {"p=a", "p=b", "p=c"}

    table = SparkTable.forPath(spark, path)
    table.delete("p = 'a'")
    table.update("id = 4", {"id": "40"})
    table.alias("t").merge(
        spark.createDataFrame([(5, "d")], "id int, p string").alias("s"), "t.id = s.id"
    ).whenNotMatchedInsertAll().execute()
    table.optimize().where("p = 'b'").executeCompaction()  # 2 files into 1
    assert len(_current(tmp_path / "t")["p=b"]) == 1
    assert _manifests(tmp_path / "t") == _current(tmp_path / "t")
    assert set(_manifests(tmp_path / "t")) == {"p=b", "p=c", "p=d"}
