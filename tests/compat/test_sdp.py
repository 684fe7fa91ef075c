"""Spark Declarative Pipelines projects run unchanged: ``from pyspark import pipelines as dp``
files, SQL files and their ``spark-pipeline.yml`` spec, with ``spark.read.table`` /
``spark.readStream.table`` reading the pipeline's datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lakefeed as lf
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from tests.pipeline.support import load, table, write

pytest.importorskip("yaml")

SPEC = """
name: sdp_demo
storage: "file://{storage}"
configuration:
  demo.input: "{input}"
libraries:
  - glob:
      include: transformations/**
"""
FLOWS = """
from pyspark import pipelines as dp
from pyspark.sql import functions as F


@dp.temporary_view
def raw():
    return spark.readStream.schema("id INT, kind STRING").json(spark.conf.get("demo.input"))


@dp.table(comment="every event")
def events():
    return spark.readStream.table("raw").where("id IS NOT NULL")


dp.create_streaming_table("all_events")


@dp.append_flow(target="all_events")
def from_events():
    return spark.readStream.table("events").select("id", "kind")


@dp.append_flow(target="all_events", name="extra")
def extra_b():
    return spark.readStream.table("raw").where("kind = 'b'").select("id", F.lit("x").alias("kind"))


@dp.materialized_view
def kind_counts():
    return spark.read.table("events").groupBy("kind").count()
"""
SQL = "CREATE MATERIALIZED VIEW big_ids AS SELECT id FROM events WHERE id > 5;\n"


def _project(root: Path) -> Path:
    data = root / "input"
    data.mkdir(parents=True)
    for part in (0, 1):
        rows = [{"id": i, "kind": "ab"[i % 2]} for i in range(part * 5 + 1, part * 5 + 6)]
        (data / f"part{part}.json").write_text("\n".join(json.dumps(r) for r in rows))
    project = write(
        root / "project", {"spark-pipeline.yml": SPEC.format(input=data, storage=root / "storage")}
    )
    write(project / "transformations", {"flows.py": FLOWS, "big.sql": SQL})
    return project


def test_a_spec_folder_runs_as_spark_pipelines_would(spark, tmp_path: Path) -> None:
    project = _project(tmp_path)
    loaded = load([project])  # the folder: its spec is found
    assert loaded.name == "sdp_demo" and loaded.configuration["demo.input"]
    assert sorted(loaded.datasets) == ["all_events", "big_ids", "events", "kind_counts", "raw"]
    assert sorted(loaded.append_flows) == ["extra", "from_events"]

    # no lakehouse given: the spec's storage holds checkpoints, tables and event log
    lakehouse = Lakehouse.at(tmp_path / "storage")
    result = lf.run(project / "spark-pipeline.yml", spark=spark)
    assert result.ok, result
    assert sorted(table(lakehouse, "events")["id"].to_pylist()) == list(range(1, 11))
    kinds = table(lakehouse, "all_events")["kind"].to_pylist()
    assert {k: kinds.count(k) for k in set(kinds)} == {"a": 5, "b": 5, "x": 5}
    counts = table(lakehouse, "kind_counts").to_pylist()
    assert sorted((r["kind"], r["count"]) for r in counts) == [("a", 5), ("b", 5)]
    assert sorted(table(lakehouse, "big_ids")["id"].to_pylist()) == [6, 7, 8, 9, 10]
    again = lf.run(project, spark=spark)  # the folder finds the spec
    assert again.ok and table(lakehouse, "all_events").num_rows == 15


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        (
            "@dp.table(format='parquet')\ndef t():\n    return None\n",
            "'t' (",
        ),
    ],
)
def test_what_lakefeed_cannot_honour_is_refused_at_load(
    tmp_path: Path, text: str, refused: str
) -> None:
    header = "from pyspark import pipelines as dp\n\n"
    folder = write(tmp_path / "p", {"p.py": header + text})
    with pytest.raises(PipelineError) as error:
        load([folder])
    problem = error.value.problems[0]
    assert refused in problem and "not supported by lakefeed" in problem, problem
    assert f"{folder / 'p.py'}:3" in problem


def test_a_spec_with_an_unknown_field_is_refused(tmp_path: Path) -> None:
    folder = write(tmp_path / "p", {"spark-pipeline.yml": "name: x\nstorage: s\nowner: me\n"})
    with pytest.raises(Exception, match="unexpected field.s. owner") as error:
        load([folder])
    assert getattr(error.value, "code", None) == "SPEC_INVALID"


def test_the_same_tables_as_pyspark_spark_pipelines(spark, tmp_path: Path) -> None:
    """pyspark's own ``spark-pipelines run`` (its local Spark Connect server from pyspark's
    jars) on the same project: its tables (Parquet, in the session warehouse) hold the rows
    lakefeed's Delta tables hold."""
    import os
    import subprocess

    import pyarrow.parquet as pq

    for module in ("grpc", "google.protobuf", "zstandard"):  # pyspark[connect,pipelines]
        pytest.importorskip(module)
    project = _project(tmp_path)
    tool = Path(pyspark_home()) / "bin" / "spark-pipelines"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [str(tool), "run", "--spec", "spark-pipeline.yml"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lakehouse = Lakehouse.at(tmp_path / "lh")
    assert lf.run(project, lakehouse=lakehouse, spark=spark).ok
    rows = {}
    for name in ("events", "all_events", "kind_counts", "big_ids"):
        theirs = pq.read_table(project / "spark-warehouse" / name)
        ours = table(lakehouse, name).select(theirs.column_names)
        rows[name] = sorted(map(str, theirs.to_pylist())), sorted(map(str, ours.to_pylist()))
    for name in ("events", "kind_counts", "big_ids"):
        assert rows[name][0] == rows[name][1], name
    # Without Delta's jar spark-pipelines stores tables as Parquet, whose file sink keeps one
    # batch log per table: the second flow's batch 0 into all_events finds `_spark_metadata/0`
    # written by the first and is skipped, rows lost. lakefeed's Delta txn per flow keeps both.
    theirs, ours = rows["all_events"]
    assert set(theirs) <= set(ours) and len(ours) == 15


def pyspark_home() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent)


def test_a_sql_table_clustered_automatically_is_refused_with_the_alternative(
    tmp_path: Path,
) -> None:
    sql = "CREATE OR REFRESH STREAMING TABLE t\nCLUSTER BY AUTO\nAS SELECT * FROM STREAM s;\n"
    folder = write(tmp_path / "p", {"t.sql": sql})
    with pytest.raises(PipelineError) as error:
        load([folder])
    (problem,) = error.value.problems
    assert "[LAKEFEED:CLUSTERING_UNSUPPORTED]" in problem and "CLUSTER BY (col" in problem
    assert f"{folder / 't.sql'}:1" in problem


BY_NAME_SPEC = """
name: roster
storage: "file://{storage}"
catalog: main
database: ops
libraries:
  - glob:
      include: flows/**
"""
# SQL flows in the form of the CREATE FLOW reference (Lakeflow / SDP SQL): a flow named apart
# from its target, INSERT INTO ... BY NAME, a ONCE backfill, a source of another database read
# with stream(...). Written for this suite with its own names and data.
BY_NAME = """
CREATE OR REFRESH STREAMING TABLE crew;

CREATE FLOW crew_live AS
INSERT INTO crew BY NAME
SELECT * FROM stream(roster.crew_feed);

CREATE FLOW crew_archive AS
INSERT INTO ONCE ops.crew BY NAME
SELECT * FROM crew_archive_source;
"""


@pytest.fixture
def roster(spark):
    """Database ``roster`` with the live feed (id, name); the archive table (name, id) in
    ``default``: its columns in the other order, so only BY NAME puts them right."""
    spark.sql("CREATE DATABASE IF NOT EXISTS roster")
    frame = spark.createDataFrame([(1, "ann"), (2, "bo")], "id INT, name STRING")
    frame.write.format("parquet").mode("overwrite").saveAsTable("roster.crew_feed")
    archive = spark.createDataFrame([("cy", 0)], "name STRING, id INT")
    archive.write.format("parquet").mode("overwrite").saveAsTable("crew_archive_source")
    yield
    spark.sql("DROP TABLE IF EXISTS crew_archive_source")
    spark.sql("DROP DATABASE IF EXISTS roster CASCADE")


def test_create_flow_insert_into_by_name(spark, tmp_path: Path, roster) -> None:
    spec = BY_NAME_SPEC.format(storage=tmp_path / "storage")
    project = write(tmp_path / "p", {"spark-pipeline.yml": spec, "flows/crew.sql": BY_NAME})
    loaded = load([project])
    assert sorted(loaded.append_flows) == ["crew_archive", "crew_live"]
    assert {f.target for f in loaded.append_flows.values()} == {"crew"}  # ops.crew is crew

    result = lf.run(project, spark=spark)
    assert result.ok, result
    crew = table(Lakehouse.at(tmp_path / "storage"), "crew").select(["id", "name"]).to_pylist()
    assert sorted(crew, key=lambda r: r["id"]) == [
        {"id": 0, "name": "cy"},
        {"id": 1, "name": "ann"},
        {"id": 2, "name": "bo"},
    ]


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE FLOW f AS INSERT OVERWRITE crew SELECT * FROM STREAM(s)",
        "CREATE FLOW ops.f AS INSERT INTO crew BY NAME SELECT * FROM STREAM(s)",
    ],
)
def test_create_flow_forms_sdp_does_not_take_are_named(tmp_path: Path, statement: str) -> None:
    folder = write(tmp_path / "p", {"f.sql": f"CREATE STREAMING TABLE crew;\n{statement};\n"})
    with pytest.raises(PipelineError) as error:
        load([folder])
    (problem,) = error.value.problems
    assert "AS INSERT [ONCE] INTO target [BY NAME] query" in problem
    assert f"{folder / 'f.sql'}:2" in problem
