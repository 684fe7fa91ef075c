"""Statement → the tables it reads and writes, table-driven and Spark-free (milliseconds).

Each row: a statement, what it reads (in text order) and what it writes. A read is written
``name``, ``delta:/path``, with ``@v<n>`` (version), ``@'ts'`` (timestamp literal),
``@(expr)`` (timestamp expression), ``~`` in front for a stream read, ``changes(...)`` after a
``table_changes`` call. Rows cover aliases, CTEs (a CTE named like a table is no read),
subqueries, comments, backquoted names and Delta paths.
"""

from __future__ import annotations

import pytest

from lakefeed.compat.delta_spark.sql.parse import parse
from lakefeed.sql.references import TableRef, references
from lakefeed.sql.spark import names_in
from lakefeed.sql.tokens import matching_paren, split_statements, tokens, top_level


def _show(ref: TableRef) -> str:
    text = f"delta:{ref.path}" if ref.path is not None else str(ref.name)
    text = ("~" if ref.stream else "") + text
    if ref.version is not None:
        text += f"@v{ref.version}"
    if ref.timestamp is not None:
        text += f"@'{ref.timestamp}'"
    if ref.timestamp_expression is not None:
        text += f"@({ref.timestamp_expression})"
    if ref.changes is not None:
        text += f" changes({', '.join(ref.changes)})"
    return text


SPARK = [
    # the two statements of the issue: a column alias named like the table hides no read
    (
        "SELECT device_id, bronze_readings AS b FROM (SELECT device_id, value AS "
        "bronze_readings FROM bronze_readings)",
        ["bronze_readings"],
        None,
    ),
    ("SELECT id, events AS e FROM events", ["events"], None),
    ("SELECT device_id FROM bronze_readings", ["bronze_readings"], None),
    ("SELECT events.id FROM events AS events", ["events"], None),
    ("SELECT e.id, e FROM events e", ["events"], None),
    ("SELECT a, b AS events FROM t", ["t"], None),
    ("SELECT count(*) AS n FROM silver, range(3)", ["silver"], None),
    ("SELECT 1 AS x", [], None),
    ("SELECT * FROM range(5)", [], None),
    ("SELECT * FROM VALUES (1), (2) AS v(a)", [], None),
    ("SELECT * FROM explode(array(1, 2))", [], None),
    # joins and comma lists
    ("SELECT * FROM a JOIN b ON f(a.x, b.x) = 1, c WHERE c.y IN (1, 2)", ["a", "b", "c"], None),
    ("SELECT * FROM a LEFT OUTER JOIN b USING (id) CROSS JOIN c", ["a", "b", "c"], None),
    ("SELECT * FROM a x, b AS y, c z", ["a", "b", "c"], None),
    ("SELECT * FROM a LEFT ANTI JOIN b ON a.id = b.id", ["a", "b"], None),
    ("SELECT * FROM a LATERAL VIEW explode(a.xs) e AS x", ["a"], None),
    # CTEs
    ("WITH c AS (SELECT 1 AS x) SELECT * FROM c", [], None),
    ("WITH events AS (SELECT * FROM raw) SELECT * FROM events", ["raw"], None),
    ("WITH c AS (SELECT * FROM c) SELECT * FROM c", ["c"], None),  # the table c, once
    ("WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b JOIN t ON 1 = 1", ["t"], None),
    ("WITH t AS (SELECT 1) SELECT * FROM db.t", ["db.t"], None),
    ("WITH c (x, y) AS (SELECT 1, 2) SELECT * FROM c, d", ["d"], None),
    ("SELECT * FROM x WHERE id IN (WITH x AS (SELECT 1 AS id) SELECT id FROM x)", ["x"], None),
    (
        "SELECT * FROM (WITH q AS (SELECT * FROM s) SELECT * FROM q) JOIN q ON 1 = 1",
        ["s", "q"],
        None,
    ),
    # subqueries, set operations
    ("SELECT * FROM (SELECT * FROM a) UNION ALL SELECT * FROM b", ["a", "b"], None),
    ("SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id)", ["t", "u"], None),
    ("SELECT (SELECT max(v) FROM u) AS m FROM t", ["u", "t"], None),
    ("SELECT * FROM a INTERSECT SELECT * FROM b EXCEPT SELECT * FROM c", ["a", "b", "c"], None),
    ("SELECT extract(year FROM ts) FROM t", ["t"], None),
    ("SELECT * FROM t WHERE s = 'FROM x JOIN y'", ["t"], None),
    # comments
    ("SELECT * -- FROM hidden\nFROM shown", ["shown"], None),
    ("SELECT /* FROM hidden */ * FROM shown /* JOIN other */", ["shown"], None),
    ("SELECT /*+ BROADCAST(d) */ * FROM delta.`/p` d JOIN e", ["delta:/p", "e"], None),
    # backquoted names, paths, multi-part names
    ("SELECT * FROM `my table` JOIN cat.db.`x.y` USING (id)", ["`my table`", "cat.db.`x.y`"], None),
    ("SELECT * FROM `events` AS `from`", ["`events`"], None),
    ("SELECT * FROM delta.`/data/events`", ["delta:/data/events"], None),
    ("SELECT * FROM DELTA . `s3a://b/t` t", ["delta:s3a://b/t"], None),
    ("SELECT * FROM parquet.`/p`", ["parquet.`/p`"], None),
    # time travel
    ("SELECT * FROM delta.`/t@v1`", ["delta:/t@v1"], None),
    ("SELECT * FROM delta.`/t@20240131120000123`", ["delta:/t@'2024-01-31 12:00:00.123'"], None),
    ("SELECT * FROM events VERSION AS OF 3 e", ["events@v3"], None),
    ("SELECT * FROM events FOR VERSION AS OF 3", ["events@v3"], None),
    ("SELECT * FROM events SYSTEM_VERSION AS OF 3", ["events@v3"], None),
    ("SELECT * FROM events FOR SYSTEM_TIME AS OF '2024-01-01'", ["events@'2024-01-01'"], None),
    ("TABLE delta.`/p` VERSION AS OF 1", ["delta:/p@v1"], None),
    ("INSERT INTO t TABLE s", ["s"], "t"),
    ("SELECT * FROM events TIMESTAMP AS OF '2024-01-01' e", ["events@'2024-01-01'"], None),
    (
        "SELECT * FROM t TIMESTAMP AS OF date_sub(current_date(), 1) x",
        ["t@(date_sub(current_date(), 1))"],
        None,
    ),
    (
        "SELECT * FROM t TIMESTAMP AS OF current_timestamp() - INTERVAL 2 DAYS e",
        ["t@(current_timestamp() - INTERVAL 2 DAYS)"],
        None,
    ),
    (
        "SELECT * FROM delta.`/p` VERSION AS OF 1 a JOIN delta.`/p` VERSION AS OF 2 b USING (id)",
        ["delta:/p@v1", "delta:/p@v2"],
        None,
    ),
    # change data feed
    ("SELECT * FROM table_changes('events', 2, 5) WHERE x > 1", ["events changes(2, 5)"], None),
    (
        "SELECT * FROM table_changes_by_path('/p', '2024-01-01')",
        ["delta:/p changes('2024-01-01')"],
        None,
    ),
    # DML and DDL: the target is no read
    ("INSERT INTO t SELECT * FROM s", ["s"], "t"),
    ("INSERT INTO TABLE delta.`/p` (a, b) VALUES (1, 'x')", [], "delta:/p"),
    ("INSERT OVERWRITE t SELECT * FROM t VERSION AS OF 1", ["t@v1"], "t"),
    ("WITH s AS (SELECT * FROM raw) INSERT INTO t SELECT * FROM s", ["raw"], "t"),
    ("UPDATE t AS x SET x.a = 1 WHERE x.c == 2", [], "t"),
    ("UPDATE t SET a = (SELECT max(b) FROM u) WHERE c IN (SELECT c FROM v)", ["u", "v"], "t"),
    ("DELETE FROM delta.`/p` WHERE c IN (SELECT c FROM v)", ["v"], "delta:/p"),
    ("DELETE FROM events WHERE events.id IN (SELECT id FROM events_old)", ["events_old"], "events"),
    ("MERGE INTO target t USING src s ON s.k = t.k WHEN MATCHED THEN DELETE", ["src"], "target"),
    (
        "MERGE INTO delta.`/t` USING (SELECT * FROM delta.`/s@v2`) s ON s.k = k "
        "WHEN NOT MATCHED THEN INSERT *",
        ["delta:/s@v2"],
        "delta:/t",
    ),
    ("CREATE TABLE x USING DELTA AS WITH q AS (SELECT * FROM src) SELECT * FROM q", ["src"], "x"),
    ("CREATE OR REPLACE TABLE delta.`/x` USING DELTA AS SELECT * FROM y", ["y"], "delta:/x"),
    ("CREATE TABLE t (id BIGINT, v STRING) USING DELTA", [], "t"),
    ("CREATE TEMP VIEW v AS SELECT * FROM delta.`/p`", ["delta:/p"], "v"),
]

STREAMS = [
    ("SELECT * FROM STREAM(LIVE.bronze) b JOIN dims d ON b.k = d.k", ["~LIVE.bronze", "dims"]),
    ("SELECT * FROM STREAM bronze", ["~bronze"]),
    ("SELECT * FROM STREAM(bronze) AS b, LIVE.dims", ["~bronze", "LIVE.dims"]),
    ("SELECT stream FROM STREAM(s)", ["~s"]),
    (
        "SELECT device_id, bronze_readings AS b FROM (SELECT device_id, value AS "
        "bronze_readings FROM STREAM(bronze_readings))",
        ["~bronze_readings"],
    ),
]


@pytest.mark.parametrize(("text", "reads", "target"), SPARK)
def test_reads_and_targets(text: str, reads: list[str], target: str | None) -> None:
    found = references(text)
    assert found is not None, text
    assert [_show(r) for r in found.reads] == reads
    assert (_show(found.target) if found.target else None) == target


@pytest.mark.parametrize(("text", "reads"), STREAMS)
def test_stream_reads_in_pipeline_sql(text: str, reads: list[str]) -> None:
    found = references(text, "databricks")
    assert found is not None
    assert [_show(r) for r in found.reads] == reads


def test_spans_cover_the_reference_and_its_time_travel() -> None:
    text = (
        "SELECT * FROM events VERSION AS OF 3 e JOIN STREAM(LIVE.s) x ON 1 = 1, "
        "delta.`/p` TIMESTAMP AS OF date_sub(current_date(), 1) d, STREAM t"
    )
    found = references(text, "databricks")
    assert found is not None
    assert [text[r.start : r.end] for r in found.reads] == [
        "events VERSION AS OF 3",
        "STREAM(LIVE.s)",
        "delta.`/p` TIMESTAMP AS OF date_sub(current_date(), 1)",
        "STREAM t",
    ]


def test_each_change_feed_function_is_placed_by_its_own_calls() -> None:
    """``table_changes`` and ``table_changes_by_path`` in one statement: the n-th call of each
    is found among that function's calls, not among all change feed reads."""
    text = (
        "SELECT * FROM table_changes_by_path('/p', 1) a JOIN table_changes('events', 2, 3) b "
        "USING (id) JOIN table_changes_by_path('/q', 4) c USING (id)"
    )
    found = references(text)
    assert found is not None
    assert [_show(r) for r in found.reads] == [
        "delta:/p changes(1)",
        "events changes(2, 3)",
        "delta:/q changes(4)",
    ]
    assert [text[r.start : r.end] for r in found.reads] == [
        "table_changes_by_path('/p', 1)",
        "table_changes('events', 2, 3)",
        "table_changes_by_path('/q', 4)",
    ]


DELTA = [  # Delta's own statements: the hand grammar; their reads: the parser's
    ("VACUUM delta.`/p` RETAIN 100 HOURS", "Vacuum", "delta:/p", []),
    ("OPTIMIZE events WHERE date = '2024-01-01' ZORDER BY (a)", "Optimize", "events", []),
    ("RESTORE TABLE db.t TO VERSION AS OF 3", "Restore", "db.t", []),
    ("DESCRIBE HISTORY delta.`/p` LIMIT 1", "DescribeHistory", "delta:/p", []),
    ("DESCRIBE DETAIL '/data/events/'", "DescribeDetail", "delta:/data/events/", []),
    ("GENERATE symlink_format_manifest FOR TABLE delta.`/p`", "Generate", "delta:/p", []),
    (
        "REPLACE TABLE t USING delta AS SELECT * FROM s, delta.`/q@v1`",
        "CreateTable",
        "t",
        ["s", "delta:/q@v1"],
    ),
    ("INSERT INTO t REPLACE WHERE a > 1 SELECT * FROM s", "Insert", "t", ["s"]),
    (
        "MERGE WITH SCHEMA EVOLUTION INTO t USING s ON s.k = t.k WHEN MATCHED THEN DELETE",
        "Merge",
        "t",
        ["s"],
    ),
    ("DROP TABLE IF EXISTS delta.`/p`", "Other", "delta:/p", []),
    ("ALTER TABLE t SET TBLPROPERTIES ('delta.appendOnly' = 'true')", "SetProperties", "t", []),
    ("DESCRIBE TABLE events", "DescribeTable", "events", []),
]


@pytest.mark.parametrize(("text", "kind", "target", "reads"), DELTA)
def test_delta_statements(text: str, kind: str, target: str, reads: list[str]) -> None:
    statement = parse(text)
    assert statement is not None
    assert type(statement).__name__ == kind
    assert _show(statement.target) == target  # type: ignore[attr-defined]
    assert [_show(r) for r in statement.reads] == reads


def test_explain_reads_what_its_statement_reads() -> None:
    text = "EXPLAIN FORMATTED SELECT * FROM delta.`/p` VERSION AS OF 2 JOIN t USING (id)"
    statement = parse(text)
    assert statement is not None and [_show(r) for r in statement.reads] == ["delta:/p@v2", "t"]
    assert text[statement.reads[0].start : statement.reads[0].end] == "delta.`/p` VERSION AS OF 2"


def test_the_issues_statements_through_delta_sql() -> None:
    for text, name in [
        (SPARK[0][0], "bronze_readings"),
        ("SELECT id, events AS e FROM events", "events"),
    ]:
        statement = parse(text)
        assert statement is not None and [r.name for r in statement.reads] == [name]


def test_unreadable_statements_are_left_to_spark_unless_they_may_read() -> None:
    assert parse("SHOW TABLES") is None
    assert parse("SET spark.sql.shuffle.partitions = 2") is None
    unread = parse("SELECT * FROM delta.`/p` WHERE (")  # sqlglot cannot read it
    assert unread is not None and not unread.readable  # type: ignore[attr-defined]


def test_one_tokenizer_splits_and_scans() -> None:
    text = "SELECT ';' AS a; -- x; y\nSELECT `;` /* ; \n */ FROM t;\n\n"
    assert split_statements(text) == [(1, "SELECT ';' AS a"), (2, "SELECT `;` \n FROM t")]
    assert matching_paren("(a, ')', (b)) c") == 12
    assert matching_paren("(a") == -1
    assert top_level("f(KEYS) KEYS", 8) and not top_level("f(KEYS) KEYS", 2)
    assert not top_level("'KEYS' KEYS", 1) and top_level("'KEYS' KEYS", 7)
    assert [t.kind for t in tokens("a.`b` 'c' 1.5 <=> --x\n/*y*/")] == [
        "word",
        "op",
        "quoted",
        "string",
        "number",
        "op",
    ]


def test_names_in_sparks_plan() -> None:
    """Spark's parsed plan (its JSON): relations in subqueries and CTE bodies, CTE names out."""
    relation = "org.apache.spark.sql.catalyst.analysis.UnresolvedRelation"
    plan = [
        {
            "class": "org.apache.spark.sql.catalyst.plans.logical.UnresolvedWith",
            "cteRelations": [
                {"_1": "c", "_2": [{"class": relation, "multipartIdentifier": "[raw]"}]}
            ],
        },
        {
            "class": "Filter",
            "condition": [{"plan": [{"class": relation, "multipartIdentifier": "[delta, /p, q]"}]}],
        },
        {"class": relation, "multipartIdentifier": "[db, t]"},
        {"class": relation, "multipartIdentifier": "[c]"},
    ]
    assert sorted(names_in(plan)) == [("db", "t"), ("delta", "/p, q"), ("raw",)]


@pytest.mark.parametrize(
    ("head", "source"),
    [
        ("FROM STREAM(LIVE.cdc)", "cdc"),
        ("FROM STREAM cdc", "cdc"),
        ("FROM `cdc`", "cdc"),
        ("FROM /* the feed */ STREAM(cdc)", "cdc"),
        ("FROM a, b", None),
        ("FROM STREAM(x) WHERE y", None),
        ("FROM STREAM(x) s", None),
        ("FROM db.t", "db.t"),  # a dataset when db is the pipeline's database (names.py)
        ("FROM `db`.t", "db.t"),
        ("", None),
    ],
)
def test_the_auto_cdc_source_is_the_parsers(head: str, source: str | None) -> None:
    from lakefeed.cdc.sql import parse_body
    from lakefeed.core.errors import PipelineDefinitionError

    body = f"{head} KEYS (id) SEQUENCE BY ts"
    if source is None:
        with pytest.raises(PipelineDefinitionError, match="expected FROM source"):
            parse_body(body, "f.sql:1")
    else:
        assert parse_body(body, "f.sql:1")["source"] == source
