"""Delta's Change Data Feed: merges, updates and deletes by lakefeed.compat.delta_spark.DeltaTable
recorded, read back with ``spark.read.format("delta").option("readChangeFeed", "true")``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from deltalake import DeltaTable as RsTable

from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.delta.changes import ChangeFeedError

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


def _changes(spark, path: Path, **options: str) -> list[tuple]:
    reader = spark.read.format("delta").option("readChangeFeed", "true")
    frame = reader.options(**options).load(str(path))
    assert frame.columns[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    assert dict(frame.dtypes)["_commit_version"] == "bigint"
    assert dict(frame.dtypes)["_commit_timestamp"] == "timestamp"
    return sorted(
        (r._commit_version, r.id, r.v, r._change_type)
        for r in frame.select("id", "v", "_change_type", "_commit_version").collect()
    )


def test_merge_update_delete_are_in_the_change_feed(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, v string").write.format(
        "delta"
    ).save(str(path))
    RsTable(str(path)).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})  # v1
    table = DeltaTable.forPath(spark, str(path))
    source = spark.createDataFrame([(1, "a2"), (4, "d")], "id long, v string")
    (
        table.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )  # v2
    table.update("id = 2", {"v": "'b2'"})  # v3
    table.delete("id = 3")  # v4
    spark.createDataFrame([(5, "e")], "id long, v string").write.format("delta").mode(
        "append"
    ).save(str(path))  # v5: an append without change files reads as inserts

    assert _changes(spark, path, startingVersion="2") == [
        (2, 1, "a", "update_preimage"),
        (2, 1, "a2", "update_postimage"),
        (2, 4, "d", "insert"),
        (3, 2, "b", "update_preimage"),
        (3, 2, "b2", "update_postimage"),
        (4, 3, "c", "delete"),
        (5, 5, "e", "insert"),
    ]
    assert [c[0] for c in _changes(spark, path, startingVersion="3", endingVersion="3")] == [3, 3]
    stamps = {e["version"]: e["timestamp"] for e in table.history().collect()}
    since = stamps[4].astimezone(dt.UTC).isoformat()
    assert [c[3] for c in _changes(spark, path, startingTimestamp=since)] == ["delete", "insert"]


def test_change_feed_reads_are_refused_clearly(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    spark.createDataFrame([(1, "a")], "id long, v string").write.format("delta").save(str(path))
    reader = spark.read.format("delta").option("readChangeFeed", "true")
    with pytest.raises(ChangeFeedError, match="exactly one of startingVersion"):
        reader.load(str(path))
    with pytest.raises(ChangeFeedError, match="enableChangeDataFeed"):
        reader.option("startingVersion", 0).load(str(path))


def _stream(spark, path: Path, checkpoint: Path, **options: str) -> list[tuple]:
    """One availableNow run of a change feed stream: the rows it delivered."""
    rows: list[tuple] = []

    def collect(batch, batch_id: int) -> None:
        for r in batch.select("id", "v", "_change_type", "_commit_version").collect():
            rows.append((r._commit_version, r.id, r.v, r._change_type))

    query = (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .options(**options)
        .load(str(path))
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sorted(rows)


def test_streaming_change_feed_from_a_snapshot_then_changes(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, v string").write.format("delta").save(
        str(path)
    )
    RsTable(str(path)).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})  # v1
    table = DeltaTable.forPath(spark, str(path))
    # No startingVersion: the current snapshot (version 1) as inserts, as Delta streams it.
    assert _stream(spark, path, tmp_path / "cp") == [
        (1, 1, "a", "insert"),
        (1, 2, "b", "insert"),
    ]
    table.update("id = 1", {"v": "'a2'"})  # v2
    table.delete("id = 2")  # v3
    assert _stream(spark, path, tmp_path / "cp") == [
        (2, 1, "a", "update_preimage"),
        (2, 1, "a2", "update_postimage"),
        (3, 2, "b", "delete"),
    ]
    assert [c[3] for c in _stream(spark, path, tmp_path / "cp2", startingVersion="3")] == ["delete"]
