"""cloudFiles on the shared SparkSession: discovery, limits, evolution modes, bad files, cleanup.

Each stream runs with ``trigger(availableNow=True)`` into ``foreachBatch`` that collects rows per
batch id, so a test sees exactly what each micro-batch delivered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException

from lakefeed.connectors.files import read_files, skipped_files

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


def _land(folder: Path, name: str, lines: list[Any]) -> Path:
    """Write a JSON-lines file atomically (hidden temp name, then rename), like a real lander."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name("." + target.name + ".tmp")
    tmp.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    tmp.rename(target)
    return target


def _reader(spark, land: Path, schema_location: Path, **options: str):
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaLocation", str(schema_location))
        .options(**options)
        .load(str(land))
    )


def _drain(df, checkpoint: Path) -> dict[int, list[dict]]:
    """Run to completion (availableNow); rows per batch id."""
    batches: dict[int, list[dict]] = {}

    def collect(batch_df, batch_id: int) -> None:
        batches[batch_id] = [r.asDict(recursive=True) for r in batch_df.collect()]

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
    finally:
        query.stop()
    return {k: v for k, v in batches.items() if v}


def _all(batches: dict[int, list[dict]]) -> list[dict]:
    return [row for rows in batches.values() for row in rows]


def test_incremental_discovery_limits_glob_and_existing(spark, tmp_path: Path) -> None:
    land = tmp_path / "land"
    for i in range(5):
        _land(land, f"day{i % 2}/f{i}.json", [{"id": i, "v": f"x{i}"}])
    (land / "readme.txt").write_text("not data")
    opts = {"cloudFiles.maxFilesPerTrigger": "2", "pathGlobFilter": "*.json"}
    df = _reader(spark, land, tmp_path / "schema", **opts)
    assert df.columns == ["id", "v", "_rescued_data", "_metadata"]
    first = _drain(df, tmp_path / "cp")
    assert [len(rows) for rows in first.values()] == [2, 2, 1]
    assert sorted(r["id"] for r in _all(first)) == ["0", "1", "2", "3", "4"]  # strings: default
    assert {r["_metadata"]["file_name"] for r in _all(first)} == {f"f{i}.json" for i in range(5)}

    _land(land, "day9/late.json", [{"id": 5, "v": "y"}, {"id": 6, "v": "z"}])
    again = _drain(_reader(spark, land, tmp_path / "schema", **opts), tmp_path / "cp")
    assert sorted(r["id"] for r in _all(again)) == ["5", "6"]  # only the new file


def test_load_path_glob_and_filter_with_alternation(spark, tmp_path: Path) -> None:
    land = tmp_path / "land"
    for name in ["a/1.json", "a/2.jsonl", "b/3.json", "c/4.json", "a/5.txt"]:
        _land(land, name, [{"id": int(name[2])}])
    df = _reader(spark, land / "{a,b}", tmp_path / "schema", pathGlobFilter="*.{json,jsonl}")
    rows = _all(_drain(df, tmp_path / "cp"))
    assert sorted(r["id"] for r in rows) == ["1", "2", "3"]


def test_add_new_columns_stops_then_restart_includes_them(spark, tmp_path: Path) -> None:
    land, schema = tmp_path / "land", tmp_path / "schema"
    _land(land, "a.json", [{"id": 1}, {"id": 2}])
    opts = {"cloudFiles.inferColumnTypes": "true", "cloudFiles.maxFilesPerTrigger": "1"}
    df = _reader(spark, land, schema, **opts)  # infers schema version 0 from a.json
    _land(land, "b.json", [{"id": 3, "color": "red", "size": 1.5}])
    with pytest.raises(StreamingQueryException, match=r"new columns \['color', 'size'\]"):
        _drain(df, tmp_path / "cp")  # batch 0 (a.json) commits, batch 1 stops the stream
    restarted = _reader(spark, land, schema, **opts)
    assert restarted.columns[:3] == ["id", "color", "size"]
    rows = _all(_drain(restarted, tmp_path / "cp"))
    assert [(r["id"], r["color"], r["size"]) for r in rows] == [(3, "red", 1.5)]
    assert (schema / "_schemas" / "1").exists()


@pytest.mark.parametrize("mode", ["rescue", "failOnNewColumns", "none"])
def test_other_evolution_modes_mid_stream(spark, tmp_path: Path, mode: str) -> None:
    land, schema = tmp_path / "land", tmp_path / "schema"
    _land(land, "a.json", [{"id": "1"}])
    opts = {"cloudFiles.schemaEvolutionMode": mode, "cloudFiles.maxFilesPerTrigger": "1"}
    df = _reader(spark, land, schema, **opts)
    late = _land(land, "b.json", [{"id": "2", "extra": "e"}])
    if mode == "failOnNewColumns":
        with pytest.raises(StreamingQueryException, match=r"\['extra'\].*failOnNewColumns"):
            _drain(df, tmp_path / "cp")
        assert not (schema / "_schemas" / "1").exists()
        return
    batches = _drain(df, tmp_path / "cp")
    assert [[r["id"] for r in rows] for rows in batches.values()] == [["1"], ["2"]]
    # Neither mode evolves; an inferred schema always has _rescued_data, so "none" keeps it too.
    assert "extra" not in df.columns
    assert json.loads(batches[1][0]["_rescued_data"]) == {"extra": "e", "_file_path": str(late)}


def test_bad_lines_rescued_and_corrupt_files_reported(spark, tmp_path: Path) -> None:
    land = tmp_path / "land"
    path = _land(land, "a.json", [{"id": 1}, "{oops", {"id": "two"}])
    schema = "id BIGINT, _rescued_data STRING"
    df = (
        spark.readStream.format("cloudFiles")
        .schema(schema)
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaLocation", str(tmp_path / "s"))
        .load(str(land))
    )
    rows = _all(_drain(df, tmp_path / "cp"))
    assert len(rows) == 3
    rescued = sorted(r["_rescued_data"] for r in rows if r["_rescued_data"])
    assert [json.loads(x) for x in rescued] == [
        {"_corrupt_record": "{oops", "_file_path": str(path)},
        {"id": "two", "_file_path": str(path)},
    ]

    parquet = tmp_path / "pq"
    parquet.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), parquet / "good.parquet")
    (parquet / "torn.parquet").write_bytes(b"PAR1\x00\x00 half a file")

    def pq_reader(location: str, **options: str):
        return read_files(
            str(parquet), "parquet", **{"cloudFiles.schemaLocation": location}, **options
        )

    with pytest.raises(StreamingQueryException, match="torn.parquet.*ignoreCorruptFiles"):
        _drain(pq_reader(str(tmp_path / "s_fail")), tmp_path / "cp_fail")
    rows = _all(
        _drain(pq_reader(str(tmp_path / "s_ok"), ignoreCorruptFiles="true"), tmp_path / "c")
    )
    assert sorted(r["id"] for r in rows) == [1, 2]
    [skipped] = skipped_files(str(tmp_path / "s_ok"))
    assert skipped["path"].endswith("torn.parquet")


def test_clean_source_move_after_commit(spark, tmp_path: Path) -> None:
    land, archive = tmp_path / "land", tmp_path / "archive"
    _land(land, "x/a.json", [{"id": 1}])
    _land(land, "b.json", [{"id": 2}])
    opts = {
        "cloudFiles.cleanSource": "MOVE",
        "cloudFiles.cleanSource.moveDestination": str(archive),
        "cloudFiles.maxFilesPerTrigger": "1",
    }
    rows = _all(_drain(_reader(spark, land, tmp_path / "s", **opts), tmp_path / "cp"))
    assert sorted(r["id"] for r in rows) == ["1", "2"]
    # Each batch's file is moved once that batch is committed, the last one included.
    assert {str(p.relative_to(archive)) for p in archive.rglob("*.json")} == {"x/a.json", "b.json"}
    assert not list(land.rglob("*.json"))
    _land(land, "c.json", [{"id": 3}])
    rows = _all(_drain(_reader(spark, land, tmp_path / "s", **opts), tmp_path / "cp"))
    assert [r["id"] for r in rows] == ["3"] and (archive / "c.json").exists()


def test_misuse_refused_before_start(spark, tmp_path: Path) -> None:
    land, loc = tmp_path / "land", str(tmp_path / "s2")
    _land(land, "a.json", [{"id": 1}])
    with pytest.raises(Exception, match="cloudFiles.schemaLocation"):
        spark.readStream.format("cloudFiles").option("cloudFiles.format", "json").load(str(land))
    with pytest.raises(Exception, match="unsupported option"):
        _reader(spark, land, tmp_path / "s", **{"cloudFiles.maxFilePerTrigger": "1"})
    with pytest.raises(Exception, match="addNewColumns needs an inferred schema"):
        (  # refused at load(), where the reader is chosen
            spark.readStream.format("cloudFiles")
            .schema("id BIGINT")
            .option("cloudFiles.format", "json")
            .option("cloudFiles.schemaLocation", str(tmp_path / "s"))
            .option("cloudFiles.schemaEvolutionMode", "addNewColumns")
            .load(str(land))
        )
    # read_files(schema=...) keeps the fixed schema and still adds the _metadata column.
    df = read_files(str(land), "json", schema="id BIGINT", **{"cloudFiles.schemaLocation": loc})
    assert df.columns == ["id", "_metadata"]
    assert [r["id"] for r in _all(_drain(df, tmp_path / "cp2"))] == [1]
    # A stream that keeps no lineage can drop the column (includeMetadata=false).
    loc2 = str(tmp_path / "s3")
    bare = read_files(
        str(land),
        "json",
        schema="id BIGINT",
        includeMetadata=False,
        **{"cloudFiles.schemaLocation": loc2},
    )
    assert bare.columns == ["id"]
    assert [r["id"] for r in _all(_drain(bare, tmp_path / "cp3"))] == [1]


def test_batch_read_reads_every_file_without_consuming(spark, tmp_path: Path) -> None:
    """A pipeline backfill reads the folder as a batch; the stream's file log is untouched."""
    land = tmp_path / "land"
    path = _land(land, "a.json", [{"id": 1}, "{oops"])
    df = (
        spark.read.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaLocation", str(tmp_path / "s"))
        .load(str(land))
    )
    rows = sorted((r["id"] or "", r["_rescued_data"] or "") for r in df.collect())
    assert rows == [
        (
            "",
            json.dumps(
                {"_corrupt_record": "{oops", "_file_path": str(path)}, separators=(",", ":")
            ),
        ),
        ("1", ""),
    ]
    assert not (tmp_path / "s" / "_lakefeed_files").exists()
