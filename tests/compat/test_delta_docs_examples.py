"""docs.delta.io's Python examples as written (delta-batch, delta-update pages), paths moved to
a temporary folder: the ones that failed or did the wrong thing on lakefeed before."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from pyspark.sql.functions import col, lit

from delta.tables import DeltaTable
from lakefeed.compat.delta_spark.exprs import for_delta_rs
from lakefeed.core.errors import LakefeedError, code_of
from lakefeed.delta import replace

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves

PEOPLE = (
    "id INT, firstName STRING, middleName STRING, lastName STRING, gender STRING, "
    "birthDate TIMESTAMP, ssn STRING, salary INT"
)


def _people(spark, path: str) -> None:
    rows = [
        (1, "Ann", "B", "Cole", "F", datetime.datetime(1950, 1, 2), "1", 10),
        (2, "Bob", "C", "Dean", "M", datetime.datetime(1958, 1, 5), "2", 20),
        (3, "Cy", "D", "Eve", "M", datetime.datetime(1980, 1, 5), "3", 30),
    ]
    spark.createDataFrame(rows, PEOPLE).write.format("delta").mode("overwrite").save(path)


def test_spark_timestamps_are_retyped_as_delta_columns() -> None:
    """Spark prints CAST(... AS TIMESTAMP) / TIMESTAMP '...', which DataFusion types as ns
    without a zone and cannot compare with Delta's µs columns."""
    utc = "'Timestamp(Microsecond, Some(\"UTC\"))'"
    assert for_delta_rs("(birthDate < CAST('1960-01-01' AS TIMESTAMP))") == (
        f"(birthDate < arrow_cast('1960-01-01', {utc}))"
    )
    assert for_delta_rs("(t.ts = TIMESTAMP '2020-01-01 00:00:00')") == (
        f"(t.ts = arrow_cast('2020-01-01 00:00:00', {utc}))"
    )
    assert for_delta_rs("(n >= CAST(CAST(s.d AS STRING) AS TIMESTAMP_NTZ))") == (
        "(n >= CAST(CAST(s.d AS STRING) AS TIMESTAMP(6)))"
    )
    assert for_delta_rs("TIMESTAMP_NTZ '2020-01-01 00:00:00'") == (
        "CAST('2020-01-01 00:00:00' AS TIMESTAMP(6))"
    )
    paris = "'Timestamp(Microsecond, Some(\"Europe/Paris\"))'"
    assert for_delta_rs("(b < CAST('1960-01-01' AS TIMESTAMP))", "Europe/Paris") == (
        f"(b < arrow_cast('1960-01-01', {paris}))"
    )
    untouched = "(x = 'CAST(a AS TIMESTAMP)') AND TRY_CAST(y AS TIMESTAMP) IS NULL AND z = 'it\\'s'"
    assert for_delta_rs(untouched) == untouched


@pytest.mark.parametrize(
    ("options", "session_mode"),
    [
        ({"replaceUsing": "event_id, start_date"}, None),
        ({"replaceOn": "s.event_id <=> t.event_id", "targetAlias": "t"}, None),
        ({"partitionOverwriteMode": "dynamic"}, None),
        ({}, "DYNAMIC"),
    ],
)
def test_selective_overwrites_lakefeed_cannot_do_are_refused(options, session_mode) -> None:
    """Before, these options were ignored and the whole table was overwritten."""
    with pytest.raises(LakefeedError) as refused:
        replace.predicate({"path": "/t", **options}, "overwrite", session_mode)
    assert code_of(refused.value) == "DELTA_UNSUPPORTED_BY_LAKEFEED"
    assert replace.predicate({"replaceWhere": "a = 1"}, "overwrite", "static") == "a = 1"
    assert replace.predicate({"replaceWhere": "a = 1"}, "append", None) is None


def test_delta_update_page_delete_and_update(spark, tmp_path: Path) -> None:
    """delta-update: 'Delete from a table' and 'Update a table', both condition forms."""
    _people(spark, f"{tmp_path}/delta/people-10m")

    deltaTable = DeltaTable.forPath(spark, f"{tmp_path}/delta/people-10m")

    # Declare the predicate by using a SQL-formatted string.
    deltaTable.delete("birthDate < '1955-01-01'")

    # Declare the predicate by using Spark SQL functions.
    deltaTable.delete(col("birthDate") < "1960-01-01")  # failed: Timestamp(µs, "UTC") < (ns)

    # Declare the predicate by using a SQL-formatted string.
    deltaTable.update(condition="gender = 'F'", set={"gender": "'Female'"})

    # Declare the predicate by using Spark SQL functions.
    deltaTable.update(condition=col("gender") == "M", set={"gender": lit("Male")})

    rows = deltaTable.toDF().select("id", "gender").collect()
    assert [tuple(r) for r in rows] == [(3, "Male")]
    deltaTable.update(
        col("birthDate") == datetime.datetime(1980, 1, 5),  # a TIMESTAMP literal
        {"birthDate": lit(datetime.datetime(1981, 1, 5))},
    )
    assert deltaTable.toDF().first()["birthDate"] == datetime.datetime(1981, 1, 5)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Europe/Paris")
    try:  # Paris time, as Spark reads it: 1981-01-04 23:30 UTC, before the row's 01:00 Paris
        deltaTable.delete(col("birthDate") < "1981-01-05 00:30:00")
        assert deltaTable.toDF().count() == 1
        deltaTable.delete(col("birthDate") < "1981-01-05 01:30:00")
        assert deltaTable.toDF().count() == 0
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_delta_batch_page_replace_where_and_user_metadata(spark, tmp_path: Path) -> None:
    """delta-batch: 'Overwrite rows matching a predicate with replaceWhere' replaces only the
    matching rows (before: the whole table), refuses rows outside the predicate;
    'Set user-defined commit metadata' reaches the history (before: dropped)."""
    events = spark.createDataFrame(
        [
            (111, datetime.date(2017, 1, 3), datetime.date(2017, 1, 4)),
            (112, datetime.date(2016, 5, 1), datetime.date(2016, 5, 2)),
            (113, datetime.date(2017, 2, 1), datetime.date(2017, 2, 2)),
        ],
        "userId INT, start_date DATE, end_date DATE",
    )
    events.write.format("delta").save(f"{tmp_path}/delta/events")
    replace_data = events.where("userId = 111").withColumn("userId", lit(999))

    replace_data.write \
      .format("delta") \
      .mode("overwrite") \
      .option("replaceWhere", "start_date >= '2017-01-01' AND end_date <= '2017-01-31'") \
      .save(f"{tmp_path}/delta/events")  # fmt: skip

    ids = spark.read.format("delta").load(f"{tmp_path}/delta/events").select("userId")
    assert sorted(r[0] for r in ids.collect()) == [112, 113, 999]
    with pytest.raises(LakefeedError) as mismatch:
        events.write.format("delta").mode("overwrite").option(
            "replaceWhere", "start_date >= '2017-01-01' AND end_date <= '2017-01-31'"
        ).save(f"{tmp_path}/delta/events")
    assert code_of(mismatch.value) == "DELTA_REPLACE_WHERE_MISMATCH"

    events.write.format("delta") \
      .mode("overwrite") \
      .option("userMetadata", "overwritten-for-fixing-incorrect-data") \
      .save(f"{tmp_path}/delta/events")  # fmt: skip

    history = DeltaTable.forPath(spark, f"{tmp_path}/delta/events").history()
    metadata = [r["userMetadata"] for r in history.orderBy("version").collect()]
    assert metadata == [None, None, "overwritten-for-fixing-incorrect-data"]


def test_delta_batch_page_auto_merge_conf(spark, tmp_path: Path) -> None:
    """delta-batch: 'Enable schema evolution in earlier versions', the session conf form."""
    target = f"{tmp_path}/target_table"
    spark.range(2).write.format("delta").save(target)
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", True)
    try:
        wider = spark.range(2, 3).withColumn("extra", lit("x"))
        wider.write.format("delta").mode("append").save(target)
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    assert spark.read.format("delta").load(target).columns == ["id", "extra"]


def test_delta_update_page_upsert_from_streaming_queries(spark, tmp_path: Path) -> None:
    """delta-update: 'Upsert from streaming queries using foreachBatch' — the docs' writer sets
    format("delta") before foreachBatch and outputMode("update"); Spark ignores the format (the
    sink is the function), lakefeed refused the update mode as a Delta sink's before."""
    spark.createDataFrame([(1, 5)], "key BIGINT, count BIGINT").write.format("delta").save(
        f"{tmp_path}/data/aggregates"
    )
    spark.range(3).selectExpr("id % 2 AS key").write.format("delta").save(f"{tmp_path}/src")
    streamingAggregatesDF = (
        spark.readStream.format("delta").load(f"{tmp_path}/src").groupBy("key").count()
    )

    deltaTable = DeltaTable.forPath(spark, f"{tmp_path}/data/aggregates")

    # fmt: off
    # Function to upsert microBatchOutputDF into Delta table using merge
    def upsertToDelta(microBatchOutputDF, batchId):
      deltaTable.alias("t").merge(
          microBatchOutputDF.alias("s"),
          "s.key = t.key") \
        .whenMatchedUpdateAll() \
        .whenNotMatchedInsertAll() \
        .execute()

    # Write the output of a streaming aggregation query into Delta table
    streamingAggregatesDF.writeStream \
      .format("delta") \
      .foreachBatch(upsertToDelta) \
      .outputMode("update") \
      .option("checkpointLocation", f"{tmp_path}/chk") \
      .trigger(availableNow=True) \
      .start().awaitTermination(120)
    # fmt: on

    rows = spark.read.format("delta").load(f"{tmp_path}/data/aggregates").collect()
    assert sorted(tuple(r) for r in rows) == [(0, 2), (1, 1)]


def test_delta_utility_page_restore(spark, tmp_path: Path) -> None:
    """delta-utility: 'Restore a Delta table to an earlier state'. A timestamp before the first
    commit fails as in Delta (before: delta-rs restored some version without a word)."""
    pathToTable = f"{tmp_path}/u"
    spark.range(3).write.format("delta").save(pathToTable)
    spark.range(3, 5).write.format("delta").mode("append").save(pathToTable)

    deltaTable = DeltaTable.forPath(spark, pathToTable)  # path-based tables, or

    deltaTable.restoreToVersion(0)  # restore table to oldest version
    assert deltaTable.toDF().count() == 3

    with pytest.raises(LakefeedError) as early:
        deltaTable.restoreToTimestamp("2019-02-14")  # restore to a specific timestamp
    assert code_of(early.value) == "DELTA_OPTION"
    second = deltaTable.history().where("version = 1").first()["timestamp"]
    deltaTable.restoreToTimestamp(second)  # the version a timestampAsOf read of it sees
    assert deltaTable.toDF().count() == 5
