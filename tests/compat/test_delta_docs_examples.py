"""delta-spark's Python API in the forms docs.delta.io documents (delta-batch, delta-update and
delta-utility pages), written for this suite with its own tables and data: the forms that failed
or did the wrong thing on lakefeed before."""

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

MEMBERS = "id INT, name STRING, tier STRING, joined TIMESTAMP, fee INT"


def _members(spark, path: str) -> None:
    rows = [
        (1, "Ann", "gold", datetime.datetime(1950, 1, 2), 10),
        (2, "Bob", "silver", datetime.datetime(1958, 1, 5), 20),
        (3, "Cy", "silver", datetime.datetime(1980, 1, 5), 30),
    ]
    spark.createDataFrame(rows, MEMBERS).write.format("delta").mode("overwrite").save(path)


def test_spark_timestamps_are_retyped_as_delta_columns() -> None:
    """Spark prints CAST(... AS TIMESTAMP) / TIMESTAMP '...', which DataFusion types as ns
    without a zone and cannot compare with Delta's µs columns."""
    utc = "'Timestamp(Microsecond, Some(\"UTC\"))'"
    assert for_delta_rs("(joined < CAST('1960-01-01' AS TIMESTAMP))") == (
        f"(joined < arrow_cast('1960-01-01', {utc}))"
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
        ({"replaceUsing": "booking_id, check_in"}, None),
        ({"replaceOn": "s.booking_id <=> t.booking_id", "targetAlias": "t"}, None),
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
    """delta-update: delete() and update() with both condition forms, a SQL string and a
    Column (set given as SQL strings and as Columns)."""
    _members(spark, f"{tmp_path}/delta/members")

    members = DeltaTable.forPath(spark, f"{tmp_path}/delta/members")

    members.delete("joined < '1952-06-01'")  # a SQL string: Ann
    members.delete(col("joined") < "1960-01-01")  # a Column; failed: Timestamp(µs, "UTC") < (ns)
    members.update(condition="tier = 'gold'", set={"tier": "'platinum'"})  # none left
    members.update(condition=col("tier") == "silver", set={"tier": lit("bronze")})

    rows = members.toDF().select("id", "tier").collect()
    assert [tuple(r) for r in rows] == [(3, "bronze")]
    members.update(
        col("joined") == datetime.datetime(1980, 1, 5),  # a TIMESTAMP literal
        {"joined": lit(datetime.datetime(1981, 1, 5))},
    )
    assert members.toDF().first()["joined"] == datetime.datetime(1981, 1, 5)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Europe/Paris")
    try:  # Paris time, as Spark reads it: 1981-01-04 23:30 UTC, before the row's 01:00 Paris
        members.delete(col("joined") < "1981-01-05 00:30:00")
        assert members.toDF().count() == 1
        members.delete(col("joined") < "1981-01-05 01:30:00")
        assert members.toDF().count() == 0
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_delta_batch_page_replace_where_and_user_metadata(spark, tmp_path: Path) -> None:
    """delta-batch: an overwrite with the replaceWhere option replaces only the matching rows
    (before: the whole table) and refuses rows outside the predicate; the userMetadata option
    reaches the history (before: dropped)."""
    bookings = spark.createDataFrame(
        [
            (501, datetime.date(2023, 3, 2), datetime.date(2023, 3, 5)),
            (502, datetime.date(2022, 11, 10), datetime.date(2022, 11, 12)),
            (503, datetime.date(2023, 4, 1), datetime.date(2023, 4, 3)),
        ],
        "guestId INT, check_in DATE, check_out DATE",
    )
    path = f"{tmp_path}/delta/bookings"
    bookings.write.format("delta").save(path)
    march = "check_in >= '2023-03-01' AND check_out <= '2023-03-31'"
    rebooked = bookings.where("guestId = 501").withColumn("guestId", lit(900))

    rebooked.write.format("delta").mode("overwrite").option("replaceWhere", march).save(path)

    ids = spark.read.format("delta").load(path).select("guestId")
    assert sorted(r[0] for r in ids.collect()) == [502, 503, 900]
    with pytest.raises(LakefeedError) as mismatch:
        bookings.write.format("delta").mode("overwrite").option("replaceWhere", march).save(path)
    assert code_of(mismatch.value) == "DELTA_REPLACE_WHERE_MISMATCH"

    note = "rewritten after the March audit"
    bookings.write.format("delta").mode("overwrite").option("userMetadata", note).save(path)

    history = DeltaTable.forPath(spark, path).history()
    metadata = [r["userMetadata"] for r in history.orderBy("version").collect()]
    assert metadata == [None, None, note]


def test_delta_batch_page_auto_merge_conf(spark, tmp_path: Path) -> None:
    """delta-batch: schema evolution turned on by the session conf
    ``spark.databricks.delta.schema.autoMerge.enabled``."""
    target = f"{tmp_path}/growing"
    spark.range(2).write.format("delta").save(target)
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", True)
    try:
        wider = spark.range(2, 3).withColumn("extra", lit("x"))
        wider.write.format("delta").mode("append").save(target)
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    assert spark.read.format("delta").load(target).columns == ["id", "extra"]


def test_delta_update_page_upsert_from_streaming_queries(spark, tmp_path: Path) -> None:
    """delta-update: a streaming aggregation upserted by a foreachBatch function that merges
    each micro-batch. The documented writer sets format("delta") before foreachBatch and
    outputMode("update"); Spark ignores the format (the sink is the function), lakefeed refused
    the update mode as a Delta sink's before."""
    kpis = f"{tmp_path}/kpis"
    spark.createDataFrame([(1, 5)], "key BIGINT, count BIGINT").write.format("delta").save(kpis)
    spark.range(3).selectExpr("id % 2 AS key").write.format("delta").save(f"{tmp_path}/src")
    counts = spark.readStream.format("delta").load(f"{tmp_path}/src").groupBy("key").count()
    totals = DeltaTable.forPath(spark, kpis)

    def merge_counts(batch, batch_id) -> None:
        (
            totals.alias("t")
            .merge(batch.alias("s"), "s.key = t.key")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )

    query = (
        counts.writeStream.format("delta")
        .foreachBatch(merge_counts)
        .outputMode("update")
        .option("checkpointLocation", f"{tmp_path}/chk")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)

    rows = spark.read.format("delta").load(kpis).collect()
    assert sorted(tuple(r) for r in rows) == [(0, 2), (1, 1)]  # ids 0..2: two even, one odd


def test_delta_utility_page_restore(spark, tmp_path: Path) -> None:
    """delta-utility: restoreToVersion and restoreToTimestamp. A timestamp before the first
    commit fails as in Delta (before: delta-rs restored some version without a word)."""
    path = f"{tmp_path}/u"
    spark.range(3).write.format("delta").save(path)
    spark.range(3, 5).write.format("delta").mode("append").save(path)

    restored = DeltaTable.forPath(spark, path)

    restored.restoreToVersion(0)
    assert restored.toDF().count() == 3

    with pytest.raises(LakefeedError) as early:
        restored.restoreToTimestamp("2001-05-20")  # before the table existed
    assert code_of(early.value) == "DELTA_OPTION"
    second = restored.history().where("version = 1").first()["timestamp"]
    restored.restoreToTimestamp(second)  # the version a timestampAsOf read of it sees
    assert restored.toDF().count() == 5
