"""A ``spark-pipeline.yml`` with ``catalog`` / ``database``: the pipeline's datasets are that
database's tables, so ``orders``, ``sales.orders`` and ``main.sales.orders`` name one dataset
(in definitions and in ``spark.read.table`` / ``spark.table``), and a name qualified with another
database reads that database's table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lakefeed as lf
from lakefeed.core.errors import ConfigError, PipelineDefinitionError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.names import Namespace
from lakefeed.testing import PipelineTest
from tests.pipeline.support import load, table, write

pytest.importorskip("yaml")
pytestmark = pytest.mark.compat  # SDP's spark.read.table(name)

SPEC = """
name: shop
storage: "{storage}"
catalog: main
{database_key}: sales
configuration:
  shop.input: "{input}"
libraries:
  - glob:
      include: transformations/**
"""
FLOWS = """
from pyspark import pipelines as dp


@dp.temporary_view
def raw():
    return spark.readStream.schema("id INT, kind STRING").json(spark.conf.get("shop.input"))


@dp.table(name="sales.orders")
def orders():
    return spark.readStream.table("raw")


@dp.materialized_view(name="main.sales.kinds")
def kinds():
    return spark.read.table("main.sales.orders").groupBy("kind").count()


@dp.materialized_view
def big():
    return spark.table("sales.orders").where("id > 3")


@dp.materialized_view
def reference():
    return spark.read.table("ref.orders")
"""
SQL = """
CREATE STREAMING TABLE sales.copied AS SELECT id FROM STREAM(main.sales.orders);
CREATE MATERIALIZED VIEW big_sql AS SELECT id FROM sales.orders WHERE id > 3;
CREATE MATERIALIZED VIEW reference_sql AS SELECT * FROM ref.orders;
"""


def _project(root: Path, database_key: str = "database") -> Path:
    data = root / "input"
    data.mkdir(parents=True)
    rows = [{"id": i, "kind": "ab"[i % 2]} for i in range(1, 6)]
    (data / "part0.json").write_text("\n".join(json.dumps(r) for r in rows))
    spec = SPEC.format(storage=root / "storage", input=data, database_key=database_key)
    project = write(root / "project", {"spark-pipeline.yml": spec})
    write(project / "transformations", {"flows.py": FLOWS, "more.sql": SQL})
    return project


@pytest.fixture
def reference_database(spark):
    """Database ``ref`` of Spark's catalog with a table ``orders`` of its own (other rows)."""
    spark.sql("CREATE DATABASE IF NOT EXISTS ref")
    spark.createDataFrame([(100, "z")], "id INT, kind STRING").write.format("parquet").mode(
        "overwrite"
    ).saveAsTable("ref.orders")
    yield
    spark.sql("DROP DATABASE IF EXISTS ref CASCADE")


@pytest.mark.parametrize("database_key", ["database", "schema"])
def test_names_resolve_in_the_specs_database(
    spark, tmp_path: Path, reference_database, database_key: str
) -> None:
    project = _project(tmp_path, database_key)
    loaded = load([project])
    assert loaded.namespace == Namespace("main", "sales")
    assert sorted(loaded.datasets) == [
        *("big", "big_sql", "copied", "kinds", "orders", "raw", "reference", "reference_sql")
    ]

    result = lf.run(project, spark=spark)
    assert result.ok, result
    lakehouse = Lakehouse.at(tmp_path / "storage")
    assert sorted(table(lakehouse, "orders")["id"].to_pylist()) == [1, 2, 3, 4, 5]
    kinds = table(lakehouse, "kinds").to_pylist()
    assert sorted((r["kind"], r["count"]) for r in kinds) == [("a", 2), ("b", 3)]
    assert sorted(table(lakehouse, "big")["id"].to_pylist()) == [4, 5]
    assert sorted(table(lakehouse, "big_sql")["id"].to_pylist()) == [4, 5]
    assert sorted(table(lakehouse, "copied")["id"].to_pylist()) == [1, 2, 3, 4, 5]
    # ref.orders: the other database's table, not the pipeline's orders
    assert table(lakehouse, "reference").to_pylist() == [{"id": 100, "kind": "z"}]
    assert table(lakehouse, "reference_sql").to_pylist() == [{"id": 100, "kind": "z"}]


GRADED = """
from delta.tables import DeltaTable
from pyspark import pipelines as dp


@dp.materialized_view(name="sales.graded")
def graded():
    orders = DeltaTable.forName(spark, "main.sales.orders").toDF()
    grades = DeltaTable.forName(spark, "ref.grades").toDF()
    return orders.join(grades, "id").select("id", "grade")
"""


def test_qualified_names_in_forname_and_the_test_kit(
    spark, tmp_path: Path, reference_database
) -> None:
    """Inside a flow ``DeltaTable.forName`` takes the pipeline's database for its lakehouse
    and another database for that database's table (it looked in the lakehouse for both);
    ``PipelineTest.rows`` takes the names the pipeline's code uses."""
    grades = [(2, "B"), (4, "D"), (100, "Z")]
    spark.createDataFrame(grades, "id INT, grade STRING").write.format("delta").saveAsTable(
        "ref.grades"
    )  # no lakehouse set: Spark's warehouse, <warehouse>/ref.db/grades
    project = _project(tmp_path)
    kit = PipelineTest(project, tmp_path / "kit", spark=spark)
    kit.step()
    ids = [{"id": i} for i in range(1, 6)]
    assert [{"id": r["id"]} for r in kit.rows("sales.orders", ["id"])] == ids
    assert kit.rows("main.sales.orders", ["id"]) == kit.rows("orders", ["id"])
    assert kit.rows("LIVE.orders", ["id"]) == kit.rows("orders", ["id"])
    with pytest.raises(PipelineDefinitionError, match="PIPELINE_OTHER_DATABASE"):
        kit.rows("ref.orders")  # not the pipeline's: another database's table

    write(project / "transformations", {"graded.py": GRADED})
    kit = PipelineTest(project, tmp_path / "kit", spark=spark)  # orders written above
    kit.step()
    assert kit.rows("sales.graded", ["id"]) == [{"id": 2, "grade": "B"}, {"id": 4, "grade": "D"}]


GAUGES = """
from pyspark import pipelines as dp


@dp.table(name="sales.gauges")
def gauges():
    return spark.readStream.format("rate").load()
"""


def test_the_test_kit_feeds_a_flow_by_its_qualified_name(spark, tmp_path: Path) -> None:
    spec = "name: g\nstorage: s\ncatalog: main\ndatabase: sales\n"
    spec += "libraries:\n  - glob:\n      include: gauges.py\n"
    project = write(tmp_path / "p", {"spark-pipeline.yml": spec, "gauges.py": GAUGES})
    kit = PipelineTest(project, tmp_path / "kit", spark=spark)
    kit.feed("main.sales.gauges", [{"value": 1}])
    kit.feed("gauges", [{"value": 2}])  # the same flow's next batch
    with pytest.raises(ConfigError, match="no flow 'ref.gauges'"):
        kit.feed("ref.gauges", [{"value": 3}])
    kit.step()
    assert kit.rows("sales.gauges", ["value"]) == [
        {"timestamp": None, "value": 1},
        {"timestamp": None, "value": 2},
    ]


def test_a_dataset_of_another_database_is_refused(tmp_path: Path) -> None:
    project = _project(tmp_path)
    extra = "\n\n@dp.table(name='archive.orders')\ndef old():\n    return spark.read.table('raw')\n"
    (project / "transformations" / "flows.py").write_text(FLOWS + extra)
    with pytest.raises(PipelineError) as error:
        load([project])
    (problem,) = error.value.problems
    assert "[LAKEFEED:PIPELINE_OTHER_DATABASE]" in problem and "'archive.orders'" in problem
    assert "main.sales" in problem


def test_a_sql_dataset_of_another_database_is_refused(tmp_path: Path) -> None:
    project = _project(tmp_path)
    sql = "CREATE MATERIALIZED VIEW archive.old AS SELECT * FROM orders;\n"
    (project / "transformations" / "more.sql").write_text(SQL + sql)
    with pytest.raises(PipelineError) as error:
        load([project])
    (problem,) = error.value.problems
    assert "[LAKEFEED:PIPELINE_OTHER_DATABASE]" in problem and "'archive.old'" in problem


def test_a_qualified_database_setting_is_refused(tmp_path: Path) -> None:
    folder = write(tmp_path / "p", {"spark-pipeline.yml": "name: x\nstorage: s\ndatabase: a.b\n"})
    with pytest.raises(PipelineDefinitionError, match="database 'a.b' is not one name"):
        load([folder])


@pytest.mark.parametrize(
    ("name", "local"),
    [
        ("orders", "orders"),
        ("sales.orders", "orders"),
        ("SALES.`orders`", "orders"),
        ("main.sales.orders", "orders"),
        ("LIVE.orders", "orders"),
        ("ref.orders", None),
        ("other.sales.orders", None),
        ("a.main.sales.orders", None),
        ("not a name", None),
    ],
)
def test_what_a_name_means_in_the_pipelines_database(name: str, local: str | None) -> None:
    assert Namespace("main", "sales").local(name) == local


def test_without_settings_the_database_is_sparks_default() -> None:
    assert Namespace().local("default.t") == "t"
    assert Namespace().local("spark_catalog.default.t") == "t"
    assert Namespace().local("sales.t") is None
