"""The change data feed of tables with deletion vectors: DELETE, UPDATE and MERGE that mark
rows write ``_change_data`` files as delta-spark's do, and ``readChangeFeed`` returns the
changed rows — not the re-added files' rows (an add and a remove of one path with different
vectors is no change by itself).

The expected changes are those of the same operations on the same table without deletion
vectors, as delta-rs's own change feed (``load_cdf``) reads them: an independent reader.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.delta import changes, create, log, merger, operations
from lakefeed.delta.clauses import Clause

pytestmark = pytest.mark.compat  # format("delta") with readChangeFeed on the test session

SCHEMA = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.string())])
M = merger


def make(root: str, deletion_vectors: bool, partitioned: bool = False) -> str:
    create.create(
        root,
        SCHEMA,
        partition_by=["part"] if partitioned else [],
        configuration={
            "delta.enableDeletionVectors": str(deletion_vectors).lower(),
            "delta.enableChangeDataFeed": "true",
        },
    )
    for part in "ab":
        ids = [i + (0 if part == "a" else 10) for i in range(6)]
        rows = pa.table({"id": ids, "part": [part] * 6, "v": [f"{part}{i}" for i in ids]}, SCHEMA)
        write_deltalake(root, rows, mode="append")
    return root


def change_all(root: str) -> int:
    """A DELETE, an UPDATE and a MERGE (delete, update, insert); the version before them."""
    before = log.latest_version(root)
    operations.delete(root, "id = 2 OR id = 12")
    operations.update(root, {"v": "'updated'"}, "id = 3")
    source = pa.table({"id": [4, 13, 40], "part": ["a", "b", "b"], "v": ["m4", "m13", "m40"]})
    clauses = [
        Clause(M.MATCHED_DELETE, "s.id = 13"),
        Clause(M.MATCHED_UPDATE_ALL),
        Clause(M.INSERT_ALL),
    ]
    merger.merge(root, source, "t.id = s.id", clauses, source_alias="s", target_alias="t")
    assert before is not None
    return before


def feed(root: str, first: int) -> list[tuple]:
    """lakefeed's change rows from version ``first``: (version - first, type, id, v)."""
    arguments = {"starting_version": first, "ending_version": log.latest_version(root)}
    rows = changes.open_feed(root, arguments).read_all()
    return _listed(rows, first)


def rs_feed(root: str, first: int) -> list[tuple]:
    reader = DeltaTable(root).load_cdf(starting_version=first)
    return _listed(pa.table(pa.RecordBatchReader.from_stream(reader).read_all()), first)


def _listed(rows: pa.Table, first: int) -> list[tuple]:
    return sorted(
        (r["_commit_version"] - first, r["_change_type"], r["id"], r["v"])
        for r in rows.select(["_commit_version", "_change_type", "id", "v"]).to_pylist()
    )


def change_files(root: str, version: int) -> list[dict[str, Any]]:
    return [a["cdc"] for a in log.commit_actions(root, version) or [] if "cdc" in a]


@pytest.mark.parametrize("partitioned", [False, True], ids=["plain", "partitioned"])
def test_dml_with_vectors_records_the_rows_it_changes(tmp_path: Path, partitioned: bool) -> None:
    with_dv = make(str(tmp_path / "dv"), True, partitioned)
    without = make(str(tmp_path / "cow"), False, partitioned)
    first = change_all(with_dv) + 1
    found = feed(with_dv, first)
    assert found == rs_feed(without, change_all(without) + 1)
    assert (0, "delete", 2, "a2") in found
    assert (2, "insert", 40, "m40") in found
    for version in range(first, first + 3):
        actions = log.commit_actions(with_dv, version) or []
        assert any(a.get("add", {}).get("deletionVector") for a in actions), version
        cdc = change_files(with_dv, version)
        assert cdc and all(c["path"].startswith("_change_data/") for c in cdc)
        assert all(not c["dataChange"] for c in cdc)
        if partitioned:
            assert all(c["partitionValues"] for c in cdc)


def test_a_vector_change_without_change_files_reads_as_its_newly_deleted_rows(
    tmp_path: Path,
) -> None:
    """A writer that records no change files for a deletion-vector DELETE (the commit's
    ``cdc`` actions taken out here): the rows in the new vector and not the old are the
    ``delete`` rows; the file's other rows are not changes."""
    root = make(str(tmp_path / "t"), True)
    operations.delete(root, "id = 1")
    operations.delete(root, "id = 2 OR id = 3")
    version = log.latest_version(root)
    assert version is not None
    path = Path(log.commit_path(root, version))
    kept = [line for line in path.read_text().splitlines() if '"cdc"' not in line]
    path.write_text("\n".join(kept) + "\n")
    assert not change_files(root, version)
    assert feed(root, version) == [(0, "delete", 2, "a2"), (0, "delete", 3, "a3")]


def test_a_range_with_the_feed_off_is_refused(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create.create(root, SCHEMA, configuration={"delta.enableDeletionVectors": "true"})
    write_deltalake(root, pa.table({"id": [1], "part": ["a"], "v": ["x"]}, SCHEMA), mode="append")
    with pytest.raises(changes.ChangeFeedError):
        feed(root, 0)


def test_spark_reads_the_feed_in_batch_and_as_a_stream(spark, tmp_path: Path) -> None:
    root = make(str(tmp_path / "t"), True)
    first = change_all(root) + 1
    batch = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", first)
        .load(root)
    )
    got = sorted(
        (r._commit_version - first, r._change_type, r.id, r.v)
        for r in batch.select("_commit_version", "_change_type", "id", "v").collect()
    )
    assert got == feed(root, first)

    # a stream without a starting version: the snapshot (vectors applied), then changes
    stream = spark.readStream.format("delta").option("readChangeFeed", "true").load(root)
    query = (
        stream.writeStream.format("memory")
        .queryName("dv_feed")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    query.awaitTermination(120)
    rows = spark.sql("select id, v, _change_type from dv_feed").collect()
    snapshot = sorted(r.id for r in rows if r._change_type == "insert")
    assert snapshot == sorted(i for i in [0, 1, 3, 4, 5, 10, 11, 14, 15, 40])
    assert json.dumps(sorted({r._change_type for r in rows})) == '["insert"]'
