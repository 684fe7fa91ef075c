"""Delta SQL through ``spark.sql`` outside pipelines, in the statement shapes docs.delta.io
documents (quick start, table batch reads and writes, update, utility), written for this suite
with its own tables and data and each checked against results computed here. Paths written
``/tmp/...`` or ``/data/...`` are moved under the test's folder."""

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
    """The quick start's shapes: CREATE TABLE delta.`path` AS SELECT ... FROM VALUES, INSERT
    OVERWRITE, UPDATE and DELETE with a WHERE, MERGE from a temp view, VERSION AS OF."""
    sql = _runner(spark, tmp_path)
    sql(
        "CREATE TABLE delta.`/tmp/lap-times` USING DELTA AS SELECT col1 AS lap FROM VALUES "
        "21,22,23,24;"
    )
    assert _ids(sql("SELECT * FROM delta.`/tmp/lap-times`;")) == [21, 22, 23, 24]
    laps = list(range(30, 36))
    written = sql(
        "INSERT OVERWRITE delta.`/tmp/lap-times` SELECT col1 AS lap FROM VALUES "
        + ",".join(map(str, laps))
    )
    assert written.collect()[0].asDict() == {"num_affected_rows": 6, "num_inserted_rows": 6}
    updated = sql(
        "-- laps divisible by three get ten times longer\n"
        "UPDATE delta.`/tmp/lap-times` SET lap = lap * 10 WHERE lap % 3 == 0;"
    )
    scaled = [lap * 10 for lap in laps if lap % 3 == 0]
    assert updated.columns == ["num_affected_rows"] and updated.first()[0] == len(scaled)
    laps = sorted([lap for lap in laps if lap % 3] + scaled)
    assert _ids(sql("SELECT * FROM delta.`/tmp/lap-times`")) == laps
    sql("-- drop the long ones\nDELETE FROM delta.`/tmp/lap-times` WHERE lap > 100;")
    laps = [lap for lap in laps if lap <= 100]
    assert _ids(sql("SELECT * FROM delta.`/tmp/lap-times`")) == laps
    late = [32, 34, 36, 38]
    sql(f"CREATE TEMP VIEW lateLaps AS SELECT col1 AS lap FROM VALUES {','.join(map(str, late))};")
    merged = sql(
        """MERGE INTO delta.`/tmp/lap-times` AS laps
        USING lateLaps
        ON laps.lap = lateLaps.lap
        WHEN MATCHED
          THEN UPDATE SET lap = lateLaps.lap
        WHEN NOT MATCHED
          THEN INSERT (lap) VALUES (lateLaps.lap);"""
    )
    assert merged.columns == [
        "num_affected_rows",
        "num_updated_rows",
        "num_deleted_rows",
        "num_inserted_rows",
    ]
    matched = [lap for lap in late if lap in laps]
    new = [lap for lap in late if lap not in laps]
    assert tuple(merged.first()) == (len(late), len(matched), 0, len(new))
    laps = sorted(laps + new)
    assert _ids(sql("SELECT * FROM delta.`/tmp/lap-times`;")) == laps
    assert _ids(sql("SELECT * FROM delta.`/tmp/lap-times` VERSION AS OF 0;")) == [21, 22, 23, 24]
    with pytest.raises(LakefeedError) as missing:
        sql("SELECT * FROM delta.`/tmp/lap-times` VERSION AS OF 99")
    assert code_of(missing.value) == "DELTA_VERSION_NOT_FOUND"
    # Delta's @v<n> path suffix, a join, a CTE and a subquery in one query: the laps of
    # version 1 (the overwrite) still in the table.
    joined = sql(
        "WITH old AS (SELECT lap FROM delta.`/tmp/lap-times@v1`) "
        "SELECT n.lap FROM delta.`/tmp/lap-times` n JOIN old ON n.lap = old.lap "
        "WHERE n.lap IN (SELECT lap FROM delta.`/tmp/lap-times` VERSION AS OF 1)"
    )
    assert _ids(joined) == [lap for lap in laps if lap in range(30, 36)]
    # the statements' views are gone; their DataFrames keep reading
    frame = sql("SELECT * FROM delta.`/tmp/lap-times` VERSION AS OF 0")
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("__lakefeed_delta_")]
    assert frame.count() == 4


def test_tables_by_name_location_and_writes(spark, tmp_path: Path) -> None:
    """CREATE TABLE IF NOT EXISTS with columns, NOT NULL, a column comment, PARTITIONED BY,
    LOCATION, COMMENT and TBLPROPERTIES; inserts, overwrites, time travel, UPDATE by name and by
    path, DELETE, DROP TABLE."""
    sql = _runner(spark, tmp_path)
    sql(
        """CREATE TABLE IF NOT EXISTS default.crew_sql (
          id INT NOT NULL,
          givenName STRING,
          otherNames STRING,
          familyName STRING,
          role STRING,
          hiredAt TIMESTAMP,
          badge STRING,
          wage INT COMMENT 'monthly'
        ) USING DELTA
        PARTITIONED BY (role)
        LOCATION '/tmp/delta/crew'
        COMMENT 'ship crew'
        TBLPROPERTIES ('team' = 'operations')"""
    )
    path = f"{tmp_path}/delta/crew"
    detail = DeltaTable.forName(spark, "crew_sql").detail().first()
    assert detail.partitionColumns == ["role"] and detail.description == "ship crew"
    assert detail.properties == {"team": "operations"}
    described = sql("DESCRIBE TABLE crew_sql").collect()
    assert [tuple(r) for r in described][-3:] == [
        ("# Partition Information", "", ""),
        ("# col_name", "data_type", "comment"),
        ("role", "string", None),
    ]
    assert tuple(described[7]) == ("wage", "int", "monthly")
    fields = {f.name: f for f in RsTable(path).schema().fields}
    assert not fields["id"].nullable and fields["wage"].metadata["comment"] == "monthly"
    assert spark.table("default.crew_sql").columns[:2] == ["id", "givenName"]
    sql(
        "INSERT INTO default.crew_sql (id, givenName, role, wage) "
        "VALUES (1, 'Ann', 'cook', 10), (2, 'Bob', 'pilot', 20)"
    )
    sql("CREATE TEMP VIEW crewCopy AS SELECT * FROM crew_sql")
    sql("INSERT INTO default.crew_sql SELECT * FROM crewCopy")
    assert _ids(sql('SELECT id FROM default.crew_sql WHERE role = "pilot"')) == [2, 2]
    assert sql(
        'SELECT COUNT(*) > 0 AS `has pilots` FROM default.crew_sql WHERE role = "pilot"'
    ).first()[0]
    sql("INSERT OVERWRITE TABLE default.crew_sql SELECT * FROM crewCopy WHERE wage > 10")
    assert _ids(sql("SELECT * FROM crew_sql")) == [2, 2]
    sql("INSERT OVERWRITE default.crew_sql SELECT * FROM crew_sql VERSION AS OF 1")
    assert _ids(sql("SELECT * FROM crew_sql")) == [1, 2]
    before = DeltaTable.forPath(spark, path).history().first().timestamp
    stamp = (before + dt.timedelta(milliseconds=1)).isoformat()
    assert _ids(sql(f"SELECT * FROM default.crew_sql TIMESTAMP AS OF '{stamp}'")) == [1, 2]
    expression = f"timestamp_millis({int(before.timestamp() * 1000) + 1}) + INTERVAL 0 DAYS"
    assert _ids(sql(f"SELECT * FROM crew_sql TIMESTAMP AS OF {expression} p")) == [1, 2]
    # the name is this session's (as Spark's in-memory catalog): another session does not see it
    with pytest.raises(LakefeedError, match="is not a Delta table"):
        DeltaTable.forName(spark.newSession(), "crew_sql")
    # UPDATE by name and by path, DELETE with a predicate no row matches
    sql("UPDATE crew_sql SET role = 'chef' WHERE role = 'cook';")
    sql("UPDATE delta.`/tmp/delta/crew` SET role = 'captain' WHERE role = 'pilot';")
    sql("DELETE FROM crew_sql WHERE hiredAt < '2001-01-01'")  # no hire dates: none match
    rows = sql("SELECT id, role FROM crew_sql").collect()
    assert sorted(map(tuple, rows)) == [(1, "chef"), (2, "captain")]
    sql("DROP TABLE crew_sql")  # the name goes, the table stays
    assert _ids(sql("SELECT * FROM delta.`/tmp/delta/crew`")) == [1, 2]
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        sql("SELECT * FROM crew_sql")
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
    """The update page's MERGE shapes: WHEN MATCHED / NOT MATCHED / NOT MATCHED BY SOURCE with a
    condition, then UPDATE SET * / INSERT * / DELETE, then a subquery source into a path."""
    sql = _runner(spark, tmp_path)
    sql(
        "CREATE OR REPLACE TABLE sensors (sensor_id INT, last_ping DATE, state STRING) "
        "USING DELTA LOCATION '/tmp/sensors'"
    )
    sql(
        "INSERT INTO sensors VALUES (1, DATE'2021-03-01', 'online'), "
        "(2, current_date(), 'online'), (3, DATE'2021-03-01', 'online')"
    )
    spark.createDataFrame(
        [(1, dt.date(2025, 2, 1)), (4, dt.date(2025, 2, 2))], "sensor_id INT, ping_day DATE"
    ).createOrReplaceTempView("pings")
    sql(
        """MERGE INTO sensors
        USING pings
        ON pings.sensor_id = sensors.sensor_id
        WHEN MATCHED THEN
          UPDATE SET sensors.last_ping = pings.ping_day
        WHEN NOT MATCHED THEN
          INSERT (sensor_id, last_ping, state) VALUES (pings.sensor_id, pings.ping_day, 'online')
        WHEN NOT MATCHED BY SOURCE AND sensors.last_ping >= (current_date() - INTERVAL '3' DAY)
        THEN
          UPDATE SET sensors.state = 'silent'"""
    )
    rows = {r.sensor_id: (r.last_ping, r.state) for r in sql("SELECT * FROM sensors").collect()}
    assert rows == {
        1: (dt.date(2025, 2, 1), "online"),  # matched: its ping day
        2: (rows[2][0], "silent"),  # not in the source, pinged recently
        3: (dt.date(2021, 3, 1), "online"),  # not in the source, too old for the condition
        4: (dt.date(2025, 2, 2), "online"),  # not in the target: inserted
    }
    spark.createDataFrame(
        [(1, dt.date(2025, 3, 1), "repair"), (9, dt.date(2025, 3, 2), "new")],
        "sensor_id INT, last_ping DATE, state STRING",
    ).createOrReplaceTempView("sensor_feed")
    sql(
        """MERGE INTO sensors
        USING sensor_feed
        ON sensor_feed.sensor_id = sensors.sensor_id
        WHEN MATCHED
          UPDATE SET *
        WHEN NOT MATCHED
          INSERT *
        WHEN NOT MATCHED BY SOURCE
          DELETE"""
    )
    states = {r.sensor_id: r.state for r in sql("SELECT * FROM sensors").collect()}
    assert states == {1: "repair", 9: "new"}
    # a subquery source with an alias, a path target
    sql(
        "MERGE INTO delta.`/tmp/sensors` t USING (SELECT 9 AS sensor_id, 'online' AS state) AS s "
        "ON t.sensor_id = s.sensor_id WHEN MATCHED AND s.state <> t.state "
        "THEN UPDATE SET state = s.state"
    )
    states = {r.sensor_id: r.state for r in sql("SELECT * FROM sensors").collect()}
    assert states == {1: "repair", 9: "online"}


def test_utility_statements(spark, tmp_path: Path) -> None:
    sql = _runner(spark, tmp_path)
    spark.range(4).selectExpr("id", "id % 2 AS part").write.format("parquet").partitionBy(
        "part"
    ).save(f"{tmp_path}/clicks")
    sql("CONVERT TO DELTA parquet.`/data/clicks` PARTITIONED BY (part int)")
    sql("INSERT INTO delta.`/data/clicks/` VALUES (10, 0)")
    sql("INSERT INTO delta.`/data/clicks/` VALUES (11, 1)")
    history = sql("DESCRIBE HISTORY '/data/clicks/'  -- every commit, newest first")
    assert [r.version for r in history.collect()] == [2, 1, 0]
    last = sql("DESCRIBE HISTORY delta.`/data/clicks/` LIMIT 1").collect()
    assert [r.version for r in last] == [2]
    detail = sql("DESCRIBE DETAIL '/data/clicks/'").first()
    assert detail.format == "delta" and detail.partitionColumns == ["part"]
    optimized = sql("OPTIMIZE delta.`/data/clicks` WHERE part = 0").first()
    assert optimized.path.endswith("clicks") and int(optimized.metrics["numFilesRemoved"]) > 1
    restored = sql("RESTORE TABLE delta.`/data/clicks/` TO VERSION AS OF 1").first()
    assert restored.num_removed_files >= 1
    assert _ids(sql("SELECT id FROM delta.`/data/clicks`")) == [0, 1, 2, 3, 10]
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        listed = sql("VACUUM delta.`/data/clicks/` RETAIN 0 HOURS DRY RUN").collect()
        assert listed and all(r.path.startswith("file:") for r in listed)
        assert sql("VACUUM delta.`/data/clicks/` RETAIN 0 HOURS").columns == ["path"]
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert _ids(sql("SELECT id FROM delta.`/data/clicks`")) == [0, 1, 2, 3, 10]
    sql("GENERATE symlink_format_manifest FOR TABLE delta.`/data/clicks`")
    assert list((tmp_path / "clicks" / "_symlink_format_manifest").rglob("manifest"))
    sql("ALTER TABLE delta.`/data/clicks` SET TBLPROPERTIES ('delta.appendOnly' = 'true')")
    assert DeltaTable.forPath(spark, f"{tmp_path}/clicks").detail().first().properties == {
        "delta.appendOnly": "true"
    }
    with pytest.raises(LakefeedError) as refused:
        sql("DROP TABLE delta.`/data/clicks`")
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
