"""SQL flows reading landing files with Databricks' ``read_files`` / ``cloud_files``, as DLT's
SQL ingestion is written: lakefeed's files source with the same options, exactly once across
runs, ``_metadata`` hidden unless the query names it."""

from __future__ import annotations

from pathlib import Path

import pytest

import lakefeed as lf
from lakefeed.connectors.files.errors import OptionError
from lakefeed.connectors.files.sql import sql_files_read
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.sql import parse_sql
from tests.pipeline.support import table, write


def test_a_files_read_keeps_its_path_format_and_options() -> None:
    (flow,) = parse_sql(
        "CREATE OR REFRESH STREAMING TABLE raw AS SELECT *, _metadata.file_name AS f\n"
        'FROM STREAM read_files("/landing/orders", format => "csv", header => true,\n'
        "  schemaHints => 'qty INT', schema => 'id BIGINT, qty INT') AS o",
        "ingest.sql",
    )
    (files,) = flow.files
    assert flow.query[files.start : files.end].startswith("STREAM read_files(")
    assert flow.render({}, ["v"]) == "SELECT *, _metadata.file_name AS f\nFROM v AS o"
    read = sql_files_read(files.function, files.args, files.named)
    assert (read.path, read.format, read.schema) == ("/landing/orders", "csv", "id BIGINT, qty INT")
    assert read.options == {"header": "true", "cloudFiles.schemaHints": "qty INT"}


def test_cloud_files_takes_a_format_and_a_map_of_options() -> None:
    (flow,) = parse_sql(
        "CREATE STREAMING LIVE TABLE raw AS SELECT * FROM "
        "cloud_files('/landing', 'json', map('cloudFiles.inferColumnTypes', 'true'))",
        "ingest.sql",
    )
    (files,) = flow.files
    read = sql_files_read(files.function, files.args, files.named)
    assert (read.path, read.format, read.options) == (
        "/landing",
        "json",
        {"cloudFiles.inferColumnTypes": "true"},
    )


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ("read_files('/landing')", "read_files takes the path, then named options"),
        ("cloud_files('/landing')", "cloud_files takes a path and a format"),
    ],
)
def test_a_files_read_missing_its_format_is_refused_with_the_form(call: str, problem: str) -> None:
    (flow,) = parse_sql(f"CREATE STREAMING TABLE raw AS SELECT * FROM STREAM {call}", "x.sql")
    (files,) = flow.files
    with pytest.raises(OptionError, match=problem):
        sql_files_read(files.function, files.args, files.named)


def test_a_files_read_takes_literals_only() -> None:
    with pytest.raises(PipelineError, match="takes literal arguments"):
        parse_sql("CREATE STREAMING TABLE raw AS SELECT * FROM read_files(concat('/a', 'b'))")


PIPELINE = """
CREATE OR REFRESH STREAMING TABLE orders
AS SELECT * FROM STREAM read_files("{landing}/csv", format => "csv", header => true,
                                   schema => 'id BIGINT, qty INT');

CREATE OR REFRESH STREAMING TABLE events
AS SELECT id, kind, _metadata.file_name AS source_file
FROM STREAM read_files('{landing}/json', format => 'json', schemaHints => 'id BIGINT');

CREATE OR REFRESH MATERIALIZED VIEW order_totals
AS SELECT count(*) AS orders, sum(qty) AS qty FROM read_files("{landing}/csv", format => "csv",
                                                  header => true, schema => 'id BIGINT, qty INT');
"""


@pytest.mark.spark
def test_sql_ingestion_runs_exactly_once_over_two_runs(spark, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    folder = write(tmp_path / "p", {"ingest.sql": PIPELINE.format(landing=landing)})
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    (landing / "csv").mkdir(parents=True)
    (landing / "json").mkdir()
    for number in (1, 2):
        (landing / "csv" / f"{number}.csv").write_text(f"id,qty\n{number},{10 * number}\n")
        (landing / "json" / f"{number}.json").write_text(f'{{"id": {number}, "kind": "k"}}\n')
        assert lf.run(folder, lakehouse=lakehouse, spark=spark, mode="available-now").ok
    orders = table(lakehouse, "orders").sort_by("id")
    assert orders.column_names == ["id", "qty"]  # no _metadata: the query did not name it
    assert orders.to_pylist() == [{"id": 1, "qty": 10}, {"id": 2, "qty": 20}]
    events = table(lakehouse, "events").sort_by("id").to_pylist()
    assert events == [
        {"id": 1, "kind": "k", "source_file": "1.json"},
        {"id": 2, "kind": "k", "source_file": "2.json"},
    ]
    assert table(lakehouse, "order_totals").to_pylist() == [{"orders": 2, "qty": 30}]
