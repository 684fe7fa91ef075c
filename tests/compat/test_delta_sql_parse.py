"""Delta SQL text → statements, without Spark (milliseconds)."""

from __future__ import annotations

import pytest

from lakefeed.compat.delta_spark.sql.parse import (
    Convert,
    CreateTable,
    Delete,
    DeltaSqlError,
    DescribeHistory,
    Insert,
    Merge,
    Optimize,
    Other,
    Restore,
    SetProperties,
    Update,
    Vacuum,
    parse,
    path_identifier,
    split_time_travel,
)


def _reads(text: str) -> list[tuple]:
    statement = parse(text)
    assert statement is not None
    return [
        (r.path, r.name, r.version, r.timestamp, text[r.start : r.end]) for r in statement.reads
    ]


def test_statements_touching_no_table_are_left_alone() -> None:
    for text in ("SET a = b", "SELECT 1", "SHOW TABLES", "SELECT * FROM range(3)", "USE db"):
        assert parse(text) is None, text
    assert parse("WITH c AS (SELECT 1 AS x) SELECT * FROM c") is None


def test_path_identifiers_and_time_travel_suffixes() -> None:
    assert path_identifier("delta.`/tmp/t`") == "/tmp/t"
    assert path_identifier(" DELTA . `s3://b/t` ") == "s3://b/t"
    assert path_identifier("parquet.`/p`") is None
    assert path_identifier("parquet.`/p`", "parquet") == "/p"
    assert path_identifier("events") is None
    assert split_time_travel("/t@v12") == ("/t", 12, None)
    assert split_time_travel("/t@20240131120000123") == ("/t", None, "2024-01-31 12:00:00.123")
    assert split_time_travel("/t@x") == ("/t@x", None, None)


def test_reads_anywhere_in_a_query() -> None:
    text = (
        "WITH old AS (SELECT * FROM delta.`/t@v1`) "
        "SELECT * FROM events VERSION AS OF 3 e, db.other JOIN old ON e.id = old.id "
        "WHERE e.id IN (SELECT id FROM delta.`s3a://b/t` TIMESTAMP AS OF '2024-01-01') "
        "AND extract(year FROM e.ts) > 2000"
    )
    assert _reads(text) == [
        ("/t", None, 1, None, "delta.`/t@v1`"),
        (None, "events", 3, None, "events VERSION AS OF 3"),
        (None, "db.other", None, None, "db.other"),
        ("s3a://b/t", None, None, "2024-01-01", "delta.`s3a://b/t` TIMESTAMP AS OF '2024-01-01'"),
    ]


def test_timestamp_expressions() -> None:
    statement = parse("SELECT * FROM t TIMESTAMP AS OF date_sub(current_date(), 1) x")
    assert statement is not None
    assert statement.reads[0].timestamp_expression == "date_sub(current_date(), 1)"
    statement = parse("SELECT * FROM t TIMESTAMP AS OF current_timestamp() - INTERVAL 2 DAYS e")
    assert statement is not None
    assert statement.reads[0].timestamp_expression == "current_timestamp() - INTERVAL 2 DAYS"


def test_comma_joins_after_a_join_condition() -> None:
    reads = _reads("SELECT * FROM a JOIN b ON f(a.x, b.x) = 1, c WHERE c.y IN (1, 2)")
    assert [r[1] for r in reads] == ["a", "b", "c"]
    assert _reads("SELECT x, y FROM a") == [(None, "a", None, None, "a")]


def test_table_changes() -> None:
    statement = parse("SELECT * FROM table_changes('events', 2, 5) WHERE x > 1")
    assert statement is not None
    (ref,) = statement.reads
    assert (ref.name, ref.changes) == ("events", ("2", "5"))
    statement = parse("SELECT * FROM table_changes_by_path('/p', '2024-01-01')")
    assert statement is not None
    assert (statement.reads[0].path, statement.reads[0].changes) == ("/p", ("'2024-01-01'",))


def test_create_table_with_every_clause() -> None:
    statement = parse(
        "CREATE OR REPLACE TABLE db.t (id BIGINT NOT NULL COMMENT 'key', "
        "d DATE GENERATED ALWAYS AS (CAST(ts AS DATE)), ts TIMESTAMP, m MAP<STRING, INT>) "
        "USING DELTA PARTITIONED BY (d) LOCATION '/x' COMMENT 'c' "
        "TBLPROPERTIES ('delta.appendOnly' = 'true', delta.enableChangeDataFeed = true)"
    )
    assert isinstance(statement, CreateTable)
    assert statement.mode == "createOrReplace" and statement.target.name == "db.t"
    assert [(c.name, c.type, c.nullable, c.generated, c.comment) for c in statement.columns] == [
        ("id", "BIGINT", False, None, "key"),
        ("d", "DATE", True, "CAST(ts AS DATE)", None),
        ("ts", "TIMESTAMP", True, None, None),
        ("m", "MAP<STRING, INT>", True, None, None),
    ]
    assert statement.partitioned_by == ["d"] and statement.location == "/x"
    assert statement.properties == {
        "delta.appendOnly": "true",
        "delta.enableChangeDataFeed": "true",
    }
    ctas = parse("CREATE TABLE IF NOT EXISTS delta.`/p` USING DELTA AS SELECT * FROM delta.`/q`")
    assert isinstance(ctas, CreateTable) and ctas.mode == "createIfNotExists"
    assert ctas.query is not None and [r.path for r in ctas.reads] == ["/q"]
    assert parse("REPLACE TABLE t USING delta AS SELECT 1").mode == "replace"  # type: ignore[union-attr]


def test_spark_property_lists() -> None:
    statement = parse("CREATE TABLE t (a INT) USING parquet OPTIONS (path '/x', 'k' = 'v', a.b 1)")
    assert isinstance(statement, CreateTable)
    assert statement.properties == {"path": "/x", "k": "v", "a.b": "1"}


def test_insert_update_delete() -> None:
    insert = parse("INSERT INTO TABLE delta.`/p` (a, b) VALUES (1, 'x')")
    assert isinstance(insert, Insert) and insert.columns == ["a", "b"] and not insert.overwrite
    overwrite = parse("INSERT OVERWRITE t SELECT * FROM s")
    assert isinstance(overwrite, Insert) and overwrite.overwrite and overwrite.columns is None
    assert isinstance(parse("INSERT INTO t REPLACE WHERE a > 1 SELECT 1"), Insert)
    update = parse("UPDATE t AS x SET x.a = 1, b = concat(b, ',') WHERE x.c == 2")
    assert isinstance(update, Update) and update.alias == "x"
    assert (
        update.assignments == {"x.a": "1", "b": "concat(b, ',')"} and update.condition == "x.c == 2"
    )
    delete = parse("DELETE FROM delta.`/p` WHERE shipped < '2020-02-02'")
    assert isinstance(delete, Delete) and delete.condition == "shipped < '2020-02-02'"
    assert delete.reads == []


def test_merge_clauses() -> None:
    merge = parse(
        "MERGE INTO target t USING (SELECT * FROM delta.`/s`) s ON s.key = t.key "
        "WHEN MATCHED AND s.d THEN DELETE "
        "WHEN MATCHED UPDATE SET * "
        "WHEN NOT MATCHED BY TARGET THEN INSERT (key, v) VALUES (s.key, 'a, b') "
        "WHEN NOT MATCHED BY SOURCE AND t.v > 1 THEN UPDATE SET t.v = 0"
    )
    assert isinstance(merge, Merge)
    assert (merge.alias, merge.source_alias, merge.condition) == ("t", "s", "s.key = t.key")
    assert [(c.when, c.condition, c.action, c.assignments) for c in merge.clauses] == [
        ("matched", "s.d", "delete", {}),
        ("matched", None, "updateAll", {}),
        ("notMatched", None, "insert", {"key": "s.key", "v": "'a, b'"}),
        ("notMatchedBySource", "t.v > 1", "update", {"t.v": "0"}),
    ]
    assert [r.path for r in merge.reads] == ["/s"]


def test_utility_statements() -> None:
    history = parse("DESCRIBE HISTORY '/data/clicks/' LIMIT 1")
    assert isinstance(history, DescribeHistory) and history.limit == 1
    assert history.target.path == "/data/clicks/"
    vacuum = parse("VACUUM delta.`/data/clicks/` RETAIN 100 HOURS DRY RUN")
    assert isinstance(vacuum, Vacuum) and (vacuum.hours, vacuum.dry_run) == (100.0, True)
    optimize = parse("OPTIMIZE events WHERE date = '2024-01-01' ZORDER BY (a, `b`)")
    assert isinstance(optimize, Optimize)
    assert (optimize.where, optimize.zorder) == ("date = '2024-01-01'", ["a", "b"])
    restore = parse("RESTORE TABLE db.orders_archive TO VERSION AS OF 3")
    assert isinstance(restore, Restore) and restore.version == 3
    restore = parse("RESTORE delta.`/p` TIMESTAMP AS OF '2024-01-01'")
    assert isinstance(restore, Restore) and restore.timestamp == "2024-01-01"
    convert = parse("CONVERT TO DELTA parquet.`/p` NO STATISTICS PARTITIONED BY (part int, p2 int)")
    assert isinstance(convert, Convert) and convert.partition_schema == "part int, p2 int"
    props = parse("ALTER TABLE t SET TBLPROPERTIES ('delta.feature.appendOnly' = 'supported')")
    assert isinstance(props, SetProperties)
    assert props.properties == {"delta.feature.appendOnly": "supported"}
    dropped = parse("DROP TABLE IF EXISTS delta.`/p`")
    assert isinstance(dropped, Other) and dropped.target.path == "/p"
    with pytest.raises(DeltaSqlError, match="parquet"):
        parse("CONVERT TO DELTA iceberg.`/p`")
