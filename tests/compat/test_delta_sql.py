"""Delta SQL through ``spark.sql`` outside pipelines: docs.delta.io's SQL examples verbatim
(quick start, table batch reads and writes, update, utility), each checked against the data.
Paths in the examples (``/tmp/delta-table``...) are moved under the test's folder."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from deltalake import DeltaTable as RsTable

from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.core.errors import LakefeedError, code_of

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


def _runner(spark, tmp_path: Path):  # noqa: ANN202
    def sql(text: str):  # noqa: ANN202
        return spark.sql(text.replace("/tmp/", f"{tmp_path}/").replace("/data/", f"{tmp_path}/"))

    return sql


def _ids(frame) -> list:  # noqa: ANN001
    return sorted(row[0] for row in frame.collect())


def test_quick_start_sql(spark, tmp_path: Path) -> None:
    sql = _runner(spark, tmp_path)
    sql(
        "CREATE TABLE delta.`/tmp/delta-table` USING DELTA AS SELECT col1 as id FROM VALUES "
        "0,1,2,3,4;"
    )
    assert _ids(sql("SELECT * FROM delta.`/tmp/delta-table`;")) == [0, 1, 2, 3, 4]
    written = sql(
        "INSERT OVERWRITE delta.`/tmp/delta-table` SELECT col1 as id FROM VALUES 5,6,7,8,9;"
    )
    assert written.collect()[0].asDict() == {"num_affected_rows": 5, "num_inserted_rows": 5}
    updated = sql(
        "-- Update every even value by adding 100 to it\n"
        "UPDATE delta.`/tmp/delta-table` SET id = id + 100 WHERE id % 2 == 0;"
    )
    assert updated.columns == ["num_affected_rows"] and updated.first()[0] == 2
    assert _ids(sql("SELECT * FROM delta.`/tmp/delta-table`")) == [5, 7, 9, 106, 108]
    sql("-- Delete every even value\nDELETE FROM delta.`/tmp/delta-table` WHERE id % 2 == 0;")
    assert _ids(sql("SELECT * FROM delta.`/tmp/delta-table`")) == [5, 7, 9]
    sql("CREATE TEMP VIEW newData AS SELECT col1 AS id FROM VALUES 1,3,5,7,9,11,13,15,17,19;")
    merged = sql(
        """MERGE INTO delta.`/tmp/delta-table` AS oldData
        USING newData
        ON oldData.id = newData.id
        WHEN MATCHED
          THEN UPDATE SET id = newData.id
        WHEN NOT MATCHED
          THEN INSERT (id) VALUES (newData.id);"""
    )
    assert merged.columns == [
        "num_affected_rows",
        "num_updated_rows",
        "num_deleted_rows",
        "num_inserted_rows",
    ]
    assert tuple(merged.first()) == (10, 3, 0, 7)
    assert _ids(sql("SELECT * FROM delta.`/tmp/delta-table`;")) == list(range(1, 20, 2))
    assert _ids(sql("SELECT * FROM delta.`/tmp/delta-table` VERSION AS OF 0;")) == [0, 1, 2, 3, 4]
    with pytest.raises(LakefeedError) as missing:
        sql("SELECT * FROM delta.`/tmp/delta-table` VERSION AS OF 99")
    assert code_of(missing.value) == "DELTA_VERSION_NOT_FOUND"
    # Delta's @v<n> path suffix, a join, a CTE and a subquery in one query.
    joined = sql(
        "WITH old AS (SELECT id FROM delta.`/tmp/delta-table@v1`) "
        "SELECT n.id FROM delta.`/tmp/delta-table` n JOIN old ON n.id = old.id "
        "WHERE n.id IN (SELECT id FROM delta.`/tmp/delta-table` VERSION AS OF 1)"
    )
    assert _ids(joined) == [5, 7, 9]
    # the statements' views are gone; their DataFrames keep reading
    frame = sql("SELECT * FROM delta.`/tmp/delta-table` VERSION AS OF 0")
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("__lakefeed_delta_")]
    assert frame.count() == 5


def test_tables_by_name_location_and_writes(spark, tmp_path: Path) -> None:
    sql = _runner(spark, tmp_path)
    sql(
        """CREATE TABLE IF NOT EXISTS default.people10m (
          id INT NOT NULL,
          firstName STRING,
          middleName STRING,
          lastName STRING,
          gender STRING,
          birthDate TIMESTAMP,
          ssn STRING,
          salary INT COMMENT 'yearly'
        ) USING DELTA
        PARTITIONED BY (gender)
        LOCATION '/tmp/delta/people10m'
        COMMENT 'people'
        TBLPROPERTIES ('department' = 'accounting')"""
    )
    path = f"{tmp_path}/delta/people10m"
    detail = DeltaTable.forName(spark, "people10m").detail().first()
    assert detail.partitionColumns == ["gender"] and detail.description == "people"
    assert detail.properties == {"department": "accounting"}
    described = sql("DESCRIBE TABLE people10m").collect()
    assert [tuple(r) for r in described][-3:] == [
        ("# Partition Information", "", ""),
        ("# col_name", "data_type", "comment"),
        ("gender", "string", None),
    ]
    assert tuple(described[7]) == ("salary", "int", "yearly")
    fields = {f.name: f for f in RsTable(path).schema().fields}
    assert not fields["id"].nullable and fields["salary"].metadata["comment"] == "yearly"
    assert spark.table("default.people10m").columns[:2] == ["id", "firstName"]
    sql(
        "INSERT INTO default.people10m (id, firstName, gender, salary) "
        "VALUES (1, 'Ann', 'F', 10), (2, 'Bob', 'M', 20)"
    )
    sql("CREATE TEMP VIEW morePeople AS SELECT * FROM people10m")
    sql("INSERT INTO default.people10m SELECT * FROM morePeople")
    assert _ids(sql('SELECT id FROM default.people10m WHERE gender = "M"')) == [2, 2]
    assert sql(
        'SELECT COUNT(*) > 0 AS `Partition exists` FROM default.people10m WHERE gender = "M"'
    ).first()[0]
    sql("INSERT OVERWRITE TABLE default.people10m SELECT * FROM morePeople WHERE salary > 10")
    assert _ids(sql("SELECT * FROM people10m")) == [2, 2]
    sql("INSERT OVERWRITE default.people10m SELECT * FROM people10m VERSION AS OF 1")
    assert _ids(sql("SELECT * FROM people10m")) == [1, 2]
    before = DeltaTable.forPath(spark, path).history().first().timestamp
    stamp = (before + dt.timedelta(milliseconds=1)).isoformat()
    assert _ids(sql(f"SELECT * FROM default.people10m TIMESTAMP AS OF '{stamp}'")) == [1, 2]
    expression = f"timestamp_millis({int(before.timestamp() * 1000) + 1}) + INTERVAL 0 DAYS"
    assert _ids(sql(f"SELECT * FROM people10m TIMESTAMP AS OF {expression} p")) == [1, 2]
    # the name is this session's (as Spark's in-memory catalog): another session does not see it
    with pytest.raises(LakefeedError, match="is not a Delta table"):
        DeltaTable.forName(spark.newSession(), "people10m")
    # the docs' update page, by name and by path
    sql("UPDATE people10m SET gender = 'Female' WHERE gender = 'F';")
    sql("UPDATE delta.`/tmp/delta/people10m` SET gender = 'Male' WHERE gender = 'M';")
    sql("DELETE FROM people10m WHERE birthDate < '1955-01-01'")  # no birth dates: none match
    rows = sql("SELECT id, gender FROM people10m").collect()
    assert sorted(map(tuple, rows)) == [(1, "Female"), (2, "Male")]
    sql("DROP TABLE people10m")  # the name goes, the table stays
    assert _ids(sql("SELECT * FROM delta.`/tmp/delta/people10m`")) == [1, 2]
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        sql("SELECT * FROM people10m")
    # a name saveAsTable wrote, read by SQL; a temp view of the same name wins (Spark's).
    spark.range(3).write.format("delta").saveAsTable("events_sql")
    assert _ids(sql("SELECT * FROM events_sql")) == [0, 1, 2]
    # INSERT INTO a Spark (non-Delta) table from a Delta read
    sql("CREATE TABLE plain_copy (id BIGINT) USING parquet")
    # Spark's own grammar lakefeed's reader does not know: Spark's statement, untouched
    sql("CREATE TABLE bucketed (a INT, b INT) USING parquet CLUSTERED BY (a) INTO 2 BUCKETS")
    assert spark.catalog.tableExists("bucketed")
    sql("INSERT INTO plain_copy SELECT id FROM events_sql WHERE id > 0")
    assert _ids(spark.table("plain_copy")) == [1, 2]
    spark.range(7, 8).createOrReplaceTempView("events_sql")
    try:
        assert _ids(sql("SELECT * FROM events_sql")) == [7]
    finally:
        spark.catalog.dropTempView("events_sql")


def test_merge_examples_of_the_update_page(spark, tmp_path: Path) -> None:
    sql = _runner(spark, tmp_path)
    sql(
        "CREATE OR REPLACE TABLE target (key INT, lastSeen DATE, status STRING) USING DELTA "
        "LOCATION '/tmp/target'"
    )
    sql(
        "INSERT INTO target VALUES (1, DATE'2020-01-01', 'active'), "
        "(2, current_date(), 'active'), (3, DATE'2020-01-01', 'active')"
    )
    spark.createDataFrame(
        [(1, dt.date(2024, 5, 1)), (4, dt.date(2024, 5, 2))], "key INT, timestamp DATE"
    ).createOrReplaceTempView("source")
    sql(
        """MERGE INTO target
        USING source
        ON source.key = target.key
        WHEN MATCHED THEN
          UPDATE SET target.lastSeen = source.timestamp
        WHEN NOT MATCHED THEN
          INSERT (key, lastSeen, status) VALUES (source.key,  source.timestamp, 'active')
        WHEN NOT MATCHED BY SOURCE AND target.lastSeen >= (current_date() - INTERVAL '5' DAY)
        THEN
          UPDATE SET target.status = 'inactive'"""
    )
    rows = {r.key: (r.lastSeen, r.status) for r in sql("SELECT * FROM target").collect()}
    assert rows == {
        1: (dt.date(2024, 5, 1), "active"),
        2: (rows[2][0], "inactive"),
        3: (dt.date(2020, 1, 1), "active"),
        4: (dt.date(2024, 5, 2), "active"),
    }
    spark.createDataFrame(
        [(1, dt.date(2024, 6, 1), "x"), (9, dt.date(2024, 6, 2), "y")],
        "key INT, lastSeen DATE, status STRING",
    ).createOrReplaceTempView("source")
    sql(
        """MERGE INTO target
        USING source
        ON source.key = target.key
        WHEN MATCHED
          UPDATE SET *
        WHEN NOT MATCHED
          INSERT *
        WHEN NOT MATCHED BY SOURCE
          DELETE"""
    )
    assert {r.key: r.status for r in sql("SELECT * FROM target").collect()} == {1: "x", 9: "y"}
    # a subquery source with an alias, a path target
    sql(
        "MERGE INTO delta.`/tmp/target` t USING (SELECT 9 AS key, 'z' AS status) AS s "
        "ON t.key = s.key WHEN MATCHED AND s.status <> t.status THEN UPDATE SET status = s.status"
    )
    assert {r.key: r.status for r in sql("SELECT * FROM target").collect()} == {1: "x", 9: "z"}


def test_utility_statements(spark, tmp_path: Path) -> None:
    sql = _runner(spark, tmp_path)
    spark.range(4).selectExpr("id", "id % 2 AS part").write.format("parquet").partitionBy(
        "part"
    ).save(f"{tmp_path}/events")
    sql("CONVERT TO DELTA parquet.`/data/events` PARTITIONED BY (part int)")
    sql("INSERT INTO delta.`/data/events/` VALUES (10, 0)")
    sql("INSERT INTO delta.`/data/events/` VALUES (11, 1)")
    history = sql("DESCRIBE HISTORY '/data/events/'          -- get the full history of the table")
    assert [r.version for r in history.collect()] == [2, 1, 0]
    last = sql("DESCRIBE HISTORY delta.`/data/events/` LIMIT 1").collect()
    assert [r.version for r in last] == [2]
    detail = sql("DESCRIBE DETAIL '/data/events/'").first()
    assert detail.format == "delta" and detail.partitionColumns == ["part"]
    optimized = sql("OPTIMIZE delta.`/data/events` WHERE part = 0").first()
    assert optimized.path.endswith("events") and int(optimized.metrics["numFilesRemoved"]) > 1
    restored = sql("RESTORE TABLE delta.`/data/events/` TO VERSION AS OF 1").first()
    assert restored.num_removed_files >= 1
    assert _ids(sql("SELECT id FROM delta.`/data/events`")) == [0, 1, 2, 3, 10]
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        listed = sql("VACUUM delta.`/data/events/` RETAIN 0 HOURS DRY RUN").collect()
        assert listed and all(r.path.startswith("file:") for r in listed)
        assert sql("VACUUM delta.`/data/events/` RETAIN 0 HOURS").columns == ["path"]
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert _ids(sql("SELECT id FROM delta.`/data/events`")) == [0, 1, 2, 3, 10]
    sql("GENERATE symlink_format_manifest FOR TABLE delta.`/data/events`")
    assert list((tmp_path / "events" / "_symlink_format_manifest").rglob("manifest"))
    sql("ALTER TABLE delta.`/data/events` SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
    assert DeltaTable.forPath(spark, f"{tmp_path}/events").detail().first().properties == {
        "delta.appendOnly": "true"
    }
    with pytest.raises(LakefeedError) as refused:
        sql("DROP TABLE delta.`/data/events`")
    assert code_of(refused.value) == "DELTA_SQL_UNSUPPORTED_BY_LAKEFEED"


def test_change_feed_and_parameters(spark, tmp_path: Path) -> None:
    sql = _runner(spark, tmp_path)
    sql(
        "CREATE TABLE delta.`/tmp/cdf` (id INT, v STRING) USING DELTA "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    sql("INSERT INTO delta.`/tmp/cdf` VALUES (1, 'a'), (2, 'b')")
    sql("UPDATE delta.`/tmp/cdf` SET v = 'B' WHERE id = 2")
    changes = sql(
        "SELECT id, v, _change_type FROM table_changes_by_path('/tmp/cdf', 2) ORDER BY 3"
    ).collect()
    assert [tuple(r) for r in changes] == [
        (2, "B", "update_postimage"),
        (2, "b", "update_preimage"),
    ]
    found = spark.sql(
        f"SELECT id FROM delta.`{tmp_path}/cdf` WHERE v = :v", args={"v": "a"}
    ).collect()
    assert [r.id for r in found] == [1]
    keys = spark.createDataFrame([(2,)], "id INT")
    joined = spark.sql(
        f"SELECT c.v FROM {{keys}} k JOIN delta.`{tmp_path}/cdf` c USING (id)", keys=keys
    )
    assert [r.v for r in joined.collect()] == ["B"]
    sql("ALTER TABLE delta.`/tmp/cdf` SET TBLPROPERTIES ('delta.feature.appendOnly' = 'supported')")
    detail = sql("DESCRIBE DETAIL delta.`/tmp/cdf`").first()
    assert detail.minWriterVersion == 7 and "appendOnly" in detail.tableFeatures
    # with a lakehouse, a name no lakehouse folder can have is simply Spark's
    spark.conf.set("lakefeed.lakehouse", str(tmp_path / "lh"))
    try:
        spark.range(2).createOrReplaceTempView("1view")
        assert _ids(spark.sql("SELECT * FROM `1view`")) == [0, 1]
    finally:
        spark.conf.unset("lakefeed.lakehouse")
        spark.catalog.dropTempView("1view")


PIPELINE = """
import lakefeed as lf
from pyspark.sql import SparkSession

@lf.materialized_view
def first_version():
    return SparkSession.active().sql("SELECT id FROM delta.`{path}` VERSION AS OF 0")
"""
PIPELINE_SQL = "CREATE MATERIALIZED VIEW latest AS SELECT id FROM delta.`{path}` WHERE id > 0"


def test_delta_paths_in_a_pipelines_sql(spark, tmp_path: Path) -> None:
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.runtime.runner import PipelineRunner, RunOptions
    from tests.pipeline.support import load, table, write

    path = str(tmp_path / "source")
    spark.range(3).write.format("delta").save(path)
    spark.range(3, 5).write.format("delta").mode("append").save(path)
    folder = write(
        tmp_path / "p",
        {"flows.py": PIPELINE.format(path=path), "latest.sql": PIPELINE_SQL.format(path=path)},
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    result = PipelineRunner(
        load([folder]), lakehouse, spark, RunOptions(mode="available-now")
    ).run()
    assert result.ok
    assert sorted(table(lakehouse, "first_version")["id"].to_pylist()) == [0, 1, 2]
    assert sorted(table(lakehouse, "latest")["id"].to_pylist()) == [1, 2, 3, 4]


ALIAS_LIKE_TABLE = (
    "SELECT device_id, bronze_readings AS b FROM (SELECT device_id, value AS bronze_readings "
    "FROM bronze_readings)"
)
BRONZE = """import lakefeed as lf

@lf.table
def bronze_readings():
    return lf.source("iot", totalRows=20, rowsPerSecond=1000, startTime="2026-01-01T00:00:00Z")
"""


def test_a_column_alias_named_like_its_table_still_reads_the_table(spark, tmp_path: Path) -> None:
    """The issue's statement, in a pipeline's SQL and then on the lakehouse the pipeline
    wrote: before sqlglot, the alias ``bronze_readings AS b`` was taken for a CTE and the
    second read failed with TABLE_OR_VIEW_NOT_FOUND."""
    from lakefeed.compat.delta_spark.tables import LAKEHOUSE_CONF
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.runtime.runner import PipelineRunner, RunOptions
    from tests.pipeline.support import load, table, write

    sql = f"CREATE MATERIALIZED VIEW readings AS {ALIAS_LIKE_TABLE}"
    folder = write(tmp_path / "p", {"bronze.py": BRONZE, "readings.sql": sql})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    result = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="once")).run()
    assert result.ok
    assert table(lakehouse, "readings").num_rows == 20
    spark.conf.set(LAKEHOUSE_CONF, str(tmp_path / "lh"))
    try:
        assert spark.sql(ALIAS_LIKE_TABLE).count() == 20
        alias = "SELECT offset, device_id AS bronze_readings FROM bronze_readings"
        assert spark.sql(alias).count() == 20
    finally:
        spark.conf.unset(LAKEHOUSE_CONF)


def test_statements_sqlglot_cannot_read_are_judged_by_sparks_parser(spark, tmp_path: Path) -> None:
    """Spark's parser decides: its own syntax error for text that is not Spark SQL, a coded
    refusal for Spark SQL naming a Delta table lakefeed could not place."""
    from pyspark.errors import ParseException

    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    with pytest.raises(LakefeedError) as unread:
        spark.sql(f"SELECT * FROM delta.`{path}` WITH ('k' = 'v')")  # Spark's options clause
    assert code_of(unread.value) == "DELTA_SQL_UNREADABLE"
    with pytest.raises(ParseException):
        spark.sql(f"SELECT * FROM delta.`{path}` WHERE (")
