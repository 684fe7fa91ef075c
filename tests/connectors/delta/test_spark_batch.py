"""Batch reads and writes through format("delta"), read back with delta-rs and polars."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.delta import log_actions, rows, unreferenced_files

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


def _rows(path: Path) -> list[dict]:
    return rows(path, key=lambda r: r["id"])


def test_write_append_overwrite_and_read_back_everywhere(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    df = spark.range(0, 50).selectExpr(
        "id",
        "id % 3 as k",
        "cast(id as string) as s",
        "timestamp'2024-01-02 03:04:05.123456' as ts",
    )
    df.write.format("delta").mode("append").option("partitionBy", "k").save(path)
    df.where("id < 10").write.format("delta").mode("append").save(path)

    table = DeltaTable(path)
    assert table.version() == 1
    assert table.metadata().partition_columns == ["k"]
    assert len(_rows(tmp_path / "t")) == 60
    # polars reads what lakefeed wrote, identically to delta-rs.
    assert pl.read_delta(path).height == 60
    back = spark.read.format("delta").load(path)
    assert back.count() == 60
    assert back.where("k = 1").count() == 20
    one = back.where("id = 7").collect()
    assert one[0]["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    assert one[0]["s"] == "7"

    df.where("id >= 40").write.format("delta").mode("overwrite").save(path)
    assert spark.read.format("delta").load(path).count() == 10
    assert spark.read.format("delta").option("versionAsOf", 1).load(path).count() == 60
    assert spark.read.format("delta").option("versionAsOf", 0).load(path).count() == 50


def test_stats_are_written_and_prune_files(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for start in range(0, 40, 10):
        spark.range(start, start + 10, numPartitions=1).write.format("delta").mode("append").save(
            path
        )
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    assert sorted(actions.column("min.id").to_pylist()) == [0, 10, 20, 30]
    assert sorted(actions.column("max.id").to_pylist()) == [9, 19, 29, 39]
    assert set(actions.column("num_records").to_pylist()) == {10}
    assert set(actions.column("null_count.id").to_pylist()) == {0}

    from lakefeed.connectors.delta.datasource import DeltaBatchReader

    df = spark.read.format("delta").load(path).where("id >= 25 and id < 27")
    assert sorted(r.id for r in df.collect()) == [25, 26]
    reader = DeltaBatchReader({"path": path}, df.schema)
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThan

    list(reader.pushFilters([GreaterThanOrEqual(("id",), 25), LessThan(("id",), 27)]))
    planned = [f for p in reader.partitions() for f in p.files]  # type: ignore[attr-defined]
    assert len(planned) == 1


def test_reads_tables_delta_rs_wrote_with_checkpoint(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "rs")
    for day in range(3):
        data = pa.table(
            {
                "id": pa.array(range(day * 5, day * 5 + 5), pa.int64()),
                "day": [dt.date(2024, 1, day + 1)] * 5,
                "name": ["a", "b", None, "d", "e"],
            }
        )
        write_deltalake(path, data, mode="append", partition_by=["day"])
    DeltaTable(path).create_checkpoint()
    write_deltalake(
        path,
        pa.table({"id": pa.array([99], pa.int64()), "day": [None], "name": ["z"]}).cast(
            pa.schema([("id", pa.int64()), ("day", pa.date32()), ("name", pa.string())])
        ),
        mode="append",
        partition_by=["day"],
    )
    df = spark.read.format("delta").load(path)
    assert df.count() == 16
    assert df.where("day = date'2024-01-02'").count() == 5
    assert df.where("day is null").collect()[0]["id"] == 99
    assert df.where("name is null").count() == 3


def test_time_travel_by_timestamp(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)  # default mode (ErrorIfExists), new table
    from lakefeed.connectors.delta.adapters import DeltaTableExistsError

    with pytest.raises(DeltaTableExistsError, match="already exists"):
        spark.range(3).write.format("delta").save(path)
    spark.range(3).write.format("delta").mode("ignore").save(path)  # no-op, like Delta
    assert DeltaTable(path).version() == 0
    first = DeltaTable(path).history()[0]["timestamp"]
    spark.range(3, 5).write.format("delta").mode("append").save(path)
    when = dt.datetime.fromtimestamp(first / 1000, dt.UTC).isoformat()
    assert spark.read.format("delta").option("timestampAsOf", when).load(path).count() == 3
    with pytest.raises(Exception, match="before the first commit"):
        spark.read.format("delta").option("timestampAsOf", "2001-01-01").load(path).count()


def test_schema_evolution_and_type_change(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    wider = spark.range(3, 5).selectExpr("id", "'x' as extra")
    with pytest.raises(Exception, match="mergeSchema"):
        wider.write.format("delta").mode("append").save(path)
    wider.write.format("delta").mode("append").option("mergeSchema", "true").save(path)
    assert [f.name for f in spark.read.format("delta").load(path).schema] == ["id", "extra"]
    assert _rows(tmp_path / "t")[4] == {"id": 4, "extra": "x"}
    assert _rows(tmp_path / "t")[0] == {"id": 0, "extra": None}
    with pytest.raises(Exception, match="incompatible type change for column 'id'"):
        spark.range(2).selectExpr("cast(id as string) as id").write.format("delta").mode(
            "append"
        ).option("mergeSchema", "true").save(path)
    # overwriteSchema replaces the schema, like Delta.
    spark.range(2).selectExpr("cast(id as string) as id").write.format("delta").mode(
        "overwrite"
    ).option("overwriteSchema", "true").save(path)
    assert DeltaTable(path).schema().fields[0].type.type == "string"


def test_bad_options_are_refused(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    with pytest.raises(Exception, match="not a Delta table"):
        spark.read.format("delta").load(str(tmp_path / "missing")).count()
    with pytest.raises(Exception, match="Partition column `nope` not found in schema"):
        spark.range(3).write.format("delta").option("partitionBy", "nope").save(path)
    # DataFrameWriter.partitionBy reaches the Delta writer (Spark alone refuses it).
    spark.range(3).selectExpr("id", "id as k").write.format("delta").partitionBy("k").save(path)
    assert DeltaTable(path).metadata().partition_columns == ["k"]
    with pytest.raises(Exception, match="partitioned by"):
        spark.range(3).selectExpr("id", "id as k").write.format("delta").mode("append").option(
            "partitionBy", "id"
        ).save(path)
    with pytest.raises(Exception, match="versionAsOf must be"):
        spark.read.format("delta").option("versionAsOf", "x").load(path).count()


def _table_facts(path: Path) -> tuple[list[dict], list[str], list[str]]:
    """Rows, partition columns and per-file statistics: what two writers must agree on."""
    stats = sorted(
        json.dumps(json.loads(a["stats"]), sort_keys=True) for a in log_actions(path, "add")
    )
    return _rows(path), list(DeltaTable(str(path)).metadata().partition_columns), stats


def test_spark_and_python_writers_commit_the_same_table(spark, tmp_path: Path) -> None:
    """A batch save lets Spark's Parquet writer make the files (the default) or the Python
    writer (``lakefeed.writer=python``): same rows, partitions and statistics, nothing left
    over, and the default is really Spark's writer (its task files, not the Python one's)."""
    df = spark.range(0, 40, numPartitions=2).selectExpr(
        "id", "id % 3 AS k", "cast(id AS double) / 2 AS half", "timestamp_millis(id) AS at"
    )
    facts = {}
    for name in ("spark", "python"):
        dst = tmp_path / name
        writer = df.write.format("delta").mode("append").partitionBy("k")
        if name == "python":
            writer = writer.option("lakefeed.writer", "python")
        writer.save(str(dst))
        facts[name] = _table_facts(dst)
        assert unreferenced_files(dst) == set()
        assert not any((dst / "_lakefeed_staging").glob("*"))
    assert facts["spark"] == facts["python"]
    assert facts["spark"][1] == ["k"]
    python_names = {Path(a["path"]).name[:11] for a in log_actions(tmp_path / "python", "add")}
    spark_names = {Path(a["path"]).name[:11] for a in log_actions(tmp_path / "spark", "add")}
    assert python_names <= {"part-00000-", "part-00001-"}
    assert not spark_names & python_names
    with pytest.raises(ValueError, match="lakefeed.writer"):
        df.write.format("delta").option("lakefeed.writer", "jvm").save(str(tmp_path / "bad"))


def test_idempotent_and_failed_batch_writes_leave_one_clean_table(spark, tmp_path: Path) -> None:
    """txnAppId/txnVersion makes a repeated save a no-op; a save whose job fails changes
    nothing and leaves no file behind (not even a task that ends after the job failed: it is
    denied its commit); vacuum removes the staging of a write that died."""
    path = tmp_path / "t"
    for _ in range(2):
        spark.range(5).write.format("delta").mode("append").option("txnAppId", "job").option(
            "txnVersion", 3
        ).save(str(path))
    assert DeltaTable(str(path)).version() == 0
    assert [(t["appId"], t["version"]) for t in log_actions(path, "txn")] == [("job", 3)]

    from pyspark.sql import functions as F

    def boom_at_7(i: int) -> int:  # the first task, slower, ends after its job failed
        if i == 4:
            time.sleep(2)
        return i if i < 7 else 1 // 0

    boom = F.udf(boom_at_7, "long")
    with pytest.raises(Exception, match="ZeroDivisionError"):
        spark.range(10, numPartitions=2).select(boom("id").alias("id")).write.format("delta").mode(
            "append"
        ).save(str(path))
    assert DeltaTable(str(path)).version() == 0
    assert len(_rows(path)) == 5
    deadline = time.monotonic() + 10  # the slow task is still writing when the save fails
    while unreferenced_files(path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert unreferenced_files(path) == set()
    assert not any((path / "_lakefeed_staging").glob("*"))

    from lakefeed.delta import table

    died = path / "_lakefeed_staging" / "write-0123abcd"
    died.mkdir(parents=True)
    (died / "part-00000.snappy.parquet").write_bytes(b"half a file")
    fresh = path / "_lakefeed_staging" / "write-4567ef01"
    fresh.mkdir()
    week_ago = time.time() - 8 * 24 * 3600
    os.utime(died, (week_ago, week_ago))
    assert "_lakefeed_staging/write-0123abcd/" in table.vacuum(path, dry_run=True)
    assert died.exists()
    table.vacuum(path, dry_run=False)
    assert not died.exists() and fresh.exists()  # a running write's staging is kept
    assert len(_rows(path)) == 5
