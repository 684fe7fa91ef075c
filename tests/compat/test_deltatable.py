"""lakefeed.compat.delta_spark.DeltaTable against real tables: written by lakefeed's Spark writer,
changed by delta-rs, read back by delta-rs and by Spark."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F

from lakefeed.compat.delta_spark import (
    DeltaTable,
    DeltaTableNotFoundError,
    MergeMultipleMatchesError,
)
from lakefeed.compat.delta_spark.exprs import ExpressionError
from lakefeed.core.errors import code_of
from lakefeed.core.flow_context import flow_context
from lakefeed.core.lakehouse import Lakehouse

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves

T0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.UTC)


def _target(spark, path: Path) -> DeltaTable:
    rows = [(i, f"v{i}", T0 + dt.timedelta(hours=i)) for i in range(1, 5)]
    frame = spark.createDataFrame(rows, "id long, v string, ts timestamp")
    frame.write.format("delta").mode("overwrite").save(str(path))
    return DeltaTable.forPath(spark, str(path))


def _rows(path: Path) -> dict[int, tuple]:
    """The table as delta-rs reads it: id -> (v, ts)."""
    table = RsTable(str(path)).to_pyarrow_table().to_pylist()
    return {r["id"]: (r["v"], r["ts"]) for r in table}


def _spark_rows(spark, path: Path) -> dict[int, tuple]:
    frame = spark.read.format("delta").load(str(path)).toArrow().to_pylist()
    return {r["id"]: (r["v"], r["ts"]) for r in frame}


def test_merge_upsert_round_trips_timestamps_in_a_non_utc_session(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        target = _target(spark, path)
        later = T0 + dt.timedelta(days=1)
        source = spark.createDataFrame(
            [(2, "new2", later), (9, "new9", later)], "id long, v string, ts timestamp"
        )
        metrics = (
            target.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
            .first()
        )
    finally:
        spark.conf.unset("spark.sql.session.timeZone")
    assert (metrics.num_updated_rows, metrics.num_inserted_rows) == (1, 1)
    expected = {i: (f"v{i}", T0 + dt.timedelta(hours=i)) for i in (1, 3, 4)}
    expected |= {2: ("new2", later), 9: ("new9", later)}
    assert _rows(path) == expected
    assert _spark_rows(spark, path) == expected
    assert target.history(1).first().operation == "MERGE"


def test_merge_keeps_timestamp_ntz_and_casts_source_types_like_delta(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    wall = dt.datetime(2024, 3, 1, 8, 30)
    spark.createDataFrame([(1, wall, 1.5)], "id long, local timestamp_ntz, x double").write.format(
        "delta"
    ).save(str(path))
    source = spark.createDataFrame(
        [(1, wall.replace(hour=9), 2), (2, wall, 3)], "id int, local timestamp_ntz, x int"
    )
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    try:
        DeltaTable.forPath(spark, str(path)).alias("t").merge(
            source.alias("s"), "t.id = s.id"
        ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
        read = spark.read.format("delta").load(str(path))
        assert dict(read.dtypes) == {"id": "bigint", "local": "timestamp_ntz", "x": "double"}
        spark_rows = sorted(tuple(r) for r in read.collect())
    finally:
        spark.conf.unset("spark.sql.session.timeZone")
    expected = [(1, wall.replace(hour=9), 2.0), (2, wall, 3.0)]
    assert spark_rows == expected
    rs_rows = RsTable(str(path)).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["local"], r["x"]) for r in rs_rows) == expected


def test_merge_with_columns_conditions_and_every_clause(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    target = _target(spark, path)
    source = spark.createDataFrame(
        [(1, "del", T0), (2, "upd", T0), (3, "skip", T0), (7, "ins", T0), (8, "no", T0)],
        "id long, v string, ts timestamp",
    )
    (
        target.alias("t")
        .merge(source.alias("s"), F.col("t.id") == F.col("s.id"))
        .whenMatchedDelete(F.col("s.v") == "del")
        .whenMatchedUpdate(
            condition="s.v = 'upd'", set={"v": F.concat(F.col("s.v"), F.lit("!")), "ts": "s.ts"}
        )
        .whenNotMatchedInsert(condition=F.col("s.v") != "no", values={"id": "s.id", "v": "s.v"})
        .whenNotMatchedBySourceUpdate(set={"v": F.upper(F.col("t.v"))})
        .execute()
    )
    rows = _rows(path)
    assert rows == {
        2: ("upd!", T0),
        3: ("v3", T0 + dt.timedelta(hours=3)),
        4: ("V4", T0 + dt.timedelta(hours=4)),
        7: ("ins", None),
    }
    target.merge(source, "target.id = source.id").whenNotMatchedBySourceDelete().execute()
    assert set(_rows(path)) == {2, 3, 7}


def test_several_source_rows_matching_one_target_row_is_an_error(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    target = _target(spark, path)
    source = spark.createDataFrame([(1, "a", T0), (1, "b", T0)], "id long, v string, ts timestamp")
    before = RsTable(str(path)).version()
    with pytest.raises(MergeMultipleMatchesError) as error:
        target.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    assert code_of(str(error.value)) == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert RsTable(str(path)).version() == before
    # Inserts only: duplicates are not an error (Delta's rule is about changing a row twice).
    target.alias("t").merge(source.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()


def test_conditions_spark_cannot_print_as_sql_are_refused(spark, tmp_path: Path) -> None:
    target = _target(spark, tmp_path / "t")
    shout = F.udf(lambda text: text.upper(), "string")
    with pytest.raises(ExpressionError, match="PythonUDF"):
        target.update(shout(F.col("v")) == "V1", {"v": "'x'"})
    with pytest.raises(ExpressionError, match="SQL string or a pyspark Column"):
        target.delete(42)  # type: ignore[arg-type]


def test_update_delete_and_idempotent_replays(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    target = _target(spark, path)
    target.update(F.col("id") == 1, {"v": F.lit("one")})
    target.delete("id = 4")
    assert _rows(path)[1][0] == "one" and 4 not in _rows(path)

    source = spark.createDataFrame([(5, "five", T0)], "id long, v string, ts timestamp")
    for _ in range(2):  # the second is a replayed batch: skipped, no commit
        (
            target.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenNotMatchedInsertAll()
            .whenMatchedUpdate(set={"v": "concat(t.v, '+')"})
            .withTransaction("query-1", 7)
            .execute()
        )
    table = RsTable(str(path))
    assert table.transaction_version("query-1") == 7
    assert _rows(path)[5][0] == "five"
    version = table.version()
    spark.conf.set("spark.databricks.delta.write.txnAppId", "query-1")
    spark.conf.set("spark.databricks.delta.write.txnVersion", "7")
    try:
        target.delete()  # Delta's session confs: version 7 is committed, so nothing happens
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion")
    assert RsTable(str(path)).version() == version and len(_rows(path)) == 4

    # autoReset: the version is used once, then unset (the next change carries no txn).
    spark.conf.set("spark.databricks.delta.write.txnAppId", "query-2")
    spark.conf.set("spark.databricks.delta.write.txnVersion", "1")
    spark.conf.set("spark.databricks.delta.write.txnVersion.autoReset.enabled", "true")
    try:
        target.update("id = 5", {"v": "'5'"})
        assert spark.conf.get("spark.databricks.delta.write.txnVersion", None) is None
    finally:
        spark.conf.unset("spark.databricks.delta.write.txnAppId")
        spark.conf.unset("spark.databricks.delta.write.txnVersion.autoReset.enabled")
    assert RsTable(str(path)).transaction_version("query-2") == 1


def test_utilities_history_detail_optimize_vacuum_restore(spark, tmp_path: Path) -> None:
    path = tmp_path / "t"
    target = _target(spark, path)
    for i in range(3):
        spark.createDataFrame([(10 + i, "x", T0)], "id long, v string, ts timestamp").write.format(
            "delta"
        ).mode("append").save(str(path))
    assert [r.version for r in target.history().collect()] == [3, 2, 1, 0]
    detail = target.detail().first()
    assert detail.format == "delta" and detail.numFiles >= 4
    result = target.optimize().executeCompaction().first()
    assert int(result.metrics["numFilesRemoved"]) >= 4
    target.optimize().executeZOrderBy("id")
    restored = target.restoreToVersion(0).first()
    assert restored.num_of_files_after_restore >= 1 and restored.num_restored_files >= 1
    assert set(_spark_rows(spark, path)) == {1, 2, 3, 4}
    with pytest.raises(Exception, match="retention"):
        target.vacuum(0)
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        target.vacuum(0)
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert set(_spark_rows(spark, path)) == {1, 2, 3, 4}
    assert target.toDF().count() == 4
    assert target.alias("t").toDF().select("t.id").count() == 4


def test_for_name_and_is_delta_table(spark, tmp_path: Path) -> None:
    house = tmp_path / "house"
    _target(spark, house / "tables" / "customers")
    with pytest.raises(DeltaTableNotFoundError):
        DeltaTable.forName(spark, "customers")  # the warehouse has no such table
    spark.conf.set("lakefeed.lakehouse", str(house))
    try:
        assert DeltaTable.forName(spark, "customers").toDF().count() == 4
    finally:
        spark.conf.unset("lakefeed.lakehouse")
    with flow_context("some_flow", Lakehouse.at(house)):  # inside a pipeline: its lakehouse
        assert DeltaTable.forName(spark, "customers").toDF().count() == 4
    assert DeltaTable.isDeltaTable(spark, str(house / "tables" / "customers"))
    assert not DeltaTable.isDeltaTable(spark, str(house))
    with pytest.raises(DeltaTableNotFoundError):
        DeltaTable.forPath(spark, str(house))
