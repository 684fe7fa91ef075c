"""Batch reads and writes through format("delta"), read back with delta-rs and polars."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake


def _rows(path: Path) -> list[dict]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


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
    from lakefeed.connectors.delta.compat import DeltaTableExistsError

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
    with pytest.raises(Exception, match="not in the data"):
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
