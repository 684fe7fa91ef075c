"""Streaming through format("delta"): exactly-once sink, change-feed source, refusals."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.delta import log_actions, unreferenced_files
from tests.support.delta import rows as delta_rows

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


def _source(path: Path, commits: int, rows: int = 3) -> None:
    for c in range(commits):
        ids = range(c * rows, c * rows + rows)
        write_deltalake(
            str(path),
            pa.table({"id": pa.array(ids, pa.int64()), "k": [f"p{i % 2}" for i in ids]}),
            mode="append",
        )


def _ids(path: Path) -> list[int]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist())


def _txns(path: Path) -> list[tuple[str, int]]:
    return [(t["appId"], t["version"]) for t in log_actions(path, "txn")]


def _run(query) -> None:
    try:
        query.awaitTermination(240)
    finally:
        query.stop()


def test_stream_delta_to_delta_with_file_limit_partitions_and_txn(spark, tmp_path: Path) -> None:
    src, dst, cp = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    _source(src, 3)

    def run():  # noqa: ANN202
        query = (
            spark.readStream.format("delta")
            .option("maxFilesPerTrigger", 2)
            .load(str(src))
            .writeStream.format("delta")
            .option("checkpointLocation", str(cp))
            .partitionBy("k")
            .trigger(availableNow=True)
            .start(str(dst))
        )
        _run(query)
        return query

    first = run().recentProgress[0]["sources"][0]
    # Progress reports how far the table is ahead of the batch (reportLatestOffset).
    assert json.loads(first["endOffset"])["reservoirVersion"] == 2
    assert json.loads(first["latestOffset"])["reservoirVersion"] == 3
    assert _ids(dst) == list(range(9))
    assert DeltaTable(str(dst)).metadata().partition_columns == ["k"]
    query_id = json.loads((cp / "metadata").read_text())["id"]
    assert _txns(dst) == [(query_id, 0), (query_id, 1)]  # 3 files, 2 per trigger
    # New source commits: the restarted query reads only them, once.
    _source(src, 0)
    write_deltalake(
        str(src), pa.table({"id": pa.array([100], pa.int64()), "k": ["p0"]}), mode="append"
    )
    run()
    assert _ids(dst) == [*range(9), 100]
    assert _txns(dst)[-1] == (query_id, 2)
    # Nothing in the folder that the table does not reference.
    assert unreferenced_files(dst) == set()


def test_complete_mode_overwrites_each_batch(spark, tmp_path: Path) -> None:
    src, dst, cp = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    _source(src, 2)

    def run() -> None:
        counts = spark.readStream.format("delta").load(str(src)).groupBy("k").count()
        _run(
            counts.writeStream.format("delta")
            .outputMode("complete")
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start(str(dst))
        )

    run()
    _source(src, 1)
    run()
    rows = delta_rows(dst, key=lambda r: r["k"])
    assert rows == [{"k": "p0", "count": 5}, {"k": "p1", "count": 4}]


def test_source_delete_fails_naming_options_then_ignore_deletes(spark, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 2)
    DeltaTable(str(src)).delete("id < 3")  # drops the whole first file

    def start(**options: str):
        reader = spark.readStream.format("delta").option("startingVersion", "0")
        for key, value in options.items():
            reader = reader.option(key, value)
        return (
            reader.load(str(src))
            .writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / f"cp{len(options)}"))
            .trigger(availableNow=True)
            .start(str(dst))
        )

    query = start()
    with pytest.raises(Exception, match="ignoreDeletes"):
        _run(query)
    _run(start(ignoreDeletes="true"))
    assert _ids(dst) == list(range(6))


def test_merge_schema_and_refusals_in_streams(spark, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 1)
    spark.range(2).selectExpr("id").write.format("delta").mode("append").save(str(dst))
    stream = spark.readStream.format("delta").load(str(src))

    def start(cp: str, **options: str):
        writer = stream.writeStream.format("delta").trigger(availableNow=True)
        for key, value in options.items():
            writer = writer.option(key, value)
        if cp:
            writer = writer.option("checkpointLocation", str(tmp_path / cp))
        return writer.start(str(dst))

    # Refused by start() itself, before any query (or checkpoint) exists.
    with pytest.raises(ValueError, match="mergeSchema"):
        start("a")
    with pytest.raises(ValueError, match="checkpointLocation"):
        start("")
    assert spark.streams.active == [] and not (tmp_path / "a").exists()
    _run(start("b", mergeSchema="true"))
    assert DeltaTable(str(dst)).schema().to_arrow().names == ["id", "k"]
    assert len(_ids(dst)) == 5
    bad = spark.readStream.format("delta").load(str(src)).selectExpr("cast(id as string) as id")
    with pytest.raises(ValueError, match="incompatible type change"):
        bad.writeStream.format("delta").options(
            checkpointLocation=str(tmp_path / "c"), mergeSchema=True
        ).trigger(availableNow=True).start(str(dst))


def test_start_keyword_options_and_partition_by_reach_the_sink(spark, tmp_path: Path) -> None:
    """``start(path, partitionBy=..., checkpointLocation=...)``: Spark drops partitionBy for
    Python sinks; lakefeed carries it, and options given to start() count for the checks."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 2)
    _run(
        spark.readStream.format("delta")
        .load(str(src))
        .writeStream.trigger(availableNow=True)
        .start(
            str(dst),
            format="delta",
            partitionBy=["k"],
            checkpointLocation=str(tmp_path / "cp"),
        )
    )
    assert _ids(dst) == list(range(6))
    assert DeltaTable(str(dst)).metadata().partition_columns == ["k"]


def test_both_writers_commit_the_same_table(spark, tmp_path: Path) -> None:
    """Spark's Parquet writer (default) and the Python sink (``lakefeed.writer=python``, or
    when ``partitionBy`` came before ``format("delta")`` and Spark fixed it for its own sinks)
    commit equal tables: same rows, partitions, statistics and txn per batch."""
    src = tmp_path / "src"
    _source(src, 2)
    frame = (
        spark.readStream.format("delta")
        .load(str(src))
        .selectExpr(
            "id", "k", "cast(id AS double) / 2 AS half", "timestamp_millis(id * 1000) AS at"
        )
    )
    tables = {}
    for name, writer in {
        "spark": frame.writeStream.format("delta").partitionBy("k"),
        "python": frame.writeStream.format("delta")
        .partitionBy("k")
        .option("lakefeed.writer", "python"),
        "fixed": frame.writeStream.partitionBy("k").format("delta"),
    }.items():
        dst = tmp_path / name
        _run(
            writer.option("checkpointLocation", str(tmp_path / f"cp-{name}"))
            .trigger(availableNow=True)
            .start(str(dst))
        )
        table = DeltaTable(str(dst))
        assert table.metadata().partition_columns == ["k"]
        query_id = json.loads((tmp_path / f"cp-{name}" / "metadata").read_text())["id"]
        assert _txns(dst) == [(query_id, 0)]
        stats = [json.loads(a["stats"]) for a in log_actions(dst, "add")]
        tables[name] = (
            sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]),
            sorted(json.dumps(s, sort_keys=True) for s in stats),
        )
        assert unreferenced_files(dst) == set()
        assert not (dst / "_lakefeed_staging").exists() or not any(
            (dst / "_lakefeed_staging").iterdir()
        )
    assert tables["spark"] == tables["python"] == tables["fixed"]
    counts = frame.groupBy("k").count().writeStream.format("delta").outputMode("update")
    with pytest.raises(ValueError, match="'append' or 'complete', not 'update'"):
        counts.option("checkpointLocation", str(tmp_path / "c")).start(str(tmp_path / "bad"))
    with pytest.raises(ValueError, match="lakefeed.writer"):
        frame.writeStream.format("delta").option("lakefeed.writer", "jvm").option(
            "checkpointLocation", str(tmp_path / "c")
        ).start(str(tmp_path / "bad"))


def test_replayed_batch_removes_files_an_earlier_attempt_left(spark, tmp_path: Path) -> None:
    """Killed after the Delta commit, before Spark's commit log and before cleaning up files a
    still earlier attempt of that batch had moved into the table: the replay writes nothing and
    removes those files (a reader of the folder must never see them)."""
    import shutil

    from lakefeed.connectors.delta.datasource import check_stream_write
    from lakefeed.delta.files import stream_file_prefix
    from lakefeed.delta.spark_write import SparkFilesSink

    checkpoint, dst = tmp_path / "cp", tmp_path / "dst"
    checkpoint.mkdir()
    app_id = "6f1c0de4-0000-4000-8000-000000000000"
    (checkpoint / "metadata").write_text(json.dumps({"id": app_id}) + "\n")
    frame = spark.range(6).selectExpr("id", "concat('p', id % 2) AS k")
    options = {"path": str(dst), "checkpointLocation": str(checkpoint), "partitionBy": "k"}
    sink = SparkFilesSink(check_stream_write(options, frame.schema, False), str(checkpoint))
    sink(frame, 0)
    committed = DeltaTable(str(dst)).file_uris()
    orphan = dst / "k=p0" / f"{stream_file_prefix(app_id, 0)}0000-earlier.c000.snappy.parquet"
    shutil.copy(committed[0].removeprefix("file://"), orphan)
    assert unreferenced_files(dst) == {"k=p0/" + orphan.name}

    sink(frame, 0)
    assert DeltaTable(str(dst)).version() == 0 and _ids(dst) == list(range(6))
    assert unreferenced_files(dst) == set()


def test_a_checkpoint_of_another_table_is_refused(spark, tmp_path: Path) -> None:
    """Offsets name their table (``reservoirId``): applied to another, they would skip rows."""
    first, second, dst = tmp_path / "first", tmp_path / "second", tmp_path / "dst"
    _source(first, 3)
    _source(second, 1)

    def start(src: Path):
        return (
            spark.readStream.format("delta")
            .load(str(src))
            .writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start(str(dst))
        )

    _run(start(first))
    with pytest.raises(Exception, match=r"DELTA_SOURCE_OTHER_TABLE.*holds offsets of Delta table"):
        _run(start(second))
    assert _ids(dst) == list(range(9))


def test_a_table_replaced_under_a_running_query_fails_it(spark, tmp_path: Path) -> None:
    """The sink keeps its table open across batches: deleted and created again under the
    running query, the table would take the next batch on the old table's state. The query
    fails with a coded error instead, and the new table stays as it was."""
    import shutil

    from pyspark.errors import StreamingQueryException

    src, dst = tmp_path / "src", tmp_path / "dst"
    _source(src, 2)
    query = (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", 1)
        .load(str(src))
        .writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start(str(dst))
    )
    try:
        query.processAllAvailable()
        assert _ids(dst) == list(range(6))
        shutil.rmtree(dst)
        _source(dst, 3, rows=1)
        write_deltalake(
            str(src), pa.table({"id": pa.array([100], pa.int64()), "k": ["p0"]}), mode="append"
        )
        with pytest.raises(StreamingQueryException, match=r"DELTA_TABLE_REPLACED"):
            query.processAllAvailable()
    finally:
        query.stop()
    assert _ids(dst) == [0, 1, 2] and _txns(dst) == []


def test_object_storage_defaults_to_spark_only_when_it_writes_in_place() -> None:
    """Spark's staged write renames every file, a copy on S3 (bench/deploy measured it)."""
    from lakefeed.delta.spark_write import default_writer

    assert default_writer("s3://bucket/lh/tables/t", in_place=True) == "spark"
    assert default_writer("s3://bucket/lh/tables/t", in_place=False) == "python"
    assert default_writer("s3a://bucket/t", in_place=False) == "python"
    assert default_writer("/data/lh/tables/t", in_place=False) == "spark"


def test_spark_writes_delta_files_in_place_and_a_failed_write_leaves_none(
    spark, tmp_path: Path
) -> None:
    """lakefeed's commit protocol: data files written at their final place (no staging, no
    ``.crc``), the files of a failed job removed (its failed task's and those of the tasks that
    had committed), and every other write of the session left to Spark's own protocol."""
    from pyspark.sql import functions as F

    from lakefeed.delta.spark_write import DIRECT_PROTOCOL, PROTOCOL_CONF

    dst, plain = tmp_path / "dst", tmp_path / "plain"
    # 3 tasks on 2 cores: the last one, failing at its last row, runs alone (a task still running
    # when its job fails is denied its commit: tests/connectors/delta/test_spark_batch has that).
    frame = spark.range(0, 1000, numPartitions=3).selectExpr("id", "concat('p', id % 2) AS k")
    frame.write.format("delta").partitionBy("k").save(str(dst))
    assert spark.conf.get(PROTOCOL_CONF) == DIRECT_PROTOCOL
    assert not (dst / "_lakefeed_staging").exists()
    assert unreferenced_files(dst) == set()
    failing = frame.withColumn(
        "id", F.when(F.col("id") == 999, F.raise_error(F.lit("boom"))).otherwise(F.col("id"))
    )
    with pytest.raises(Exception, match="boom"):
        failing.write.format("delta").mode("append").save(str(dst))
    # On a loaded machine another task may still be writing when the job fails: it is denied
    # its commit and removes its file itself, moments later (as in test_spark_batch).
    deadline = time.monotonic() + 10
    while unreferenced_files(dst) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert unreferenced_files(dst) == set()
    assert _ids(dst) == list(range(1000))
    frame.write.parquet(str(plain))
    assert (plain / "_SUCCESS").exists()
