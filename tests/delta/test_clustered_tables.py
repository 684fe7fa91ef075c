"""Tables lakefeed creates clustered (issue 33): the delta-spark builder's ``clusterBy``, SQL
``CREATE TABLE ... CLUSTER BY``, and pipeline tables declared with ``cluster_by=`` (DLT, SDP,
``lf``) or ``CLUSTER BY (...)`` in pipeline SQL get the writer features ``clustering`` and
``domainMetadata`` and the ``delta.clustering`` domain (physical names under column mapping), as
delta-spark makes them; what is written into them reads back the same through delta-rs's
kernel reader. Clustering and partitioning together are refused, as by Delta."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lakefeed as lf
from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.core.errors import code_of
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import clustering, log, log_writer
from lakefeed.pipeline.graph import PipelineError
from tests.delta.test_foreign_tables import _spark_rows, expected
from tests.pipeline.support import load, write

pytestmark = pytest.mark.compat


def _clustered_by(root: str) -> list[list[str]]:
    """The ``delta.clustering`` domain's columns as the log holds them."""
    version = log.latest_version(root)
    assert version is not None
    text = log_writer.domain(root, version, clustering.DOMAIN)
    assert text is not None, f"{root} is not clustered"
    return json.loads(text)["clusteringColumns"]


def _features(root: str) -> set[str]:
    return set(log.rs_table(root).protocol().writer_features or [])


def test_the_builder_and_sql_create_clustered_tables(spark, tmp_path: Path) -> None:
    root = str(tmp_path / "built")
    (
        DeltaTable.create(spark)
        .location(root)
        .addColumn("id", "BIGINT")
        .addColumn("region", "STRING")
        .clusterBy("region")
        .execute()
    )
    assert _clustered_by(root) == [["region"]]
    assert {"clustering", "domainMetadata"} <= _features(root)
    spark.createDataFrame([(1, "eu"), (2, "us")], "id long, region string").write.format(
        "delta"
    ).mode("append").save(root)
    assert expected(root) == [(1, "eu"), (2, "us")]
    assert clustering.columns_of(root, log.rs_table(root)) == ["region"]
    detail = DeltaTable.forPath(spark, root).detail().collect()[0]
    assert detail["clusteringColumns"] == ["region"]

    sql_root = tmp_path / "sql"
    spark.sql(
        f"CREATE TABLE delta.`{sql_root}` (id BIGINT, day DATE, kind STRING) USING delta "
        "CLUSTER BY (kind, day)"
    )
    assert _clustered_by(str(sql_root)) == [["kind"], ["day"]]
    selected = tmp_path / "ctas"
    spark.sql(
        f"CREATE TABLE delta.`{selected}` USING delta CLUSTER BY (k) AS "
        "SELECT col1 AS k, col2 AS v FROM VALUES (1, 'a'), (2, 'b')"
    )
    assert _clustered_by(str(selected)) == [["k"]]
    assert expected(str(selected)) == [(1, "a"), (2, "b")]


def test_column_mapping_clusters_by_physical_name(spark, tmp_path: Path) -> None:
    root = str(tmp_path / "mapped")
    (
        DeltaTable.create(spark)
        .location(root)
        .addColumn("id", "BIGINT")
        .addColumn("region", "STRING")
        .property("delta.columnMapping.mode", "name")
        .property("delta.enableDeletionVectors", "true")
        .clusterBy("region")
        .execute()
    )
    table = log.rs_table(root)
    physical = log.table_mapping(table).physical_names()["region"]
    assert physical != "region" and _clustered_by(root) == [[physical]]
    assert clustering.columns_of(root, table) == ["region"]
    rows = spark.createDataFrame([(1, "eu"), (2, "us")], "id long, region string")
    rows.write.format("delta").mode("append").save(root)
    assert (
        expected(root)
        == [(1, "eu"), (2, "us")]
        == _spark_rows(spark.read.format("delta").load(root))
    )
    DeltaTable.forPath(spark, root).delete("id = 1")  # deletion vectors, lakefeed's commit
    assert expected(root) == [(2, "us")] == _spark_rows(spark.read.format("delta").load(root))
    assert _clustered_by(root) == [[physical]]


@pytest.mark.parametrize(
    "make",
    [
        lambda spark, root: (
            DeltaTable.create(spark)
            .location(root)
            .addColumn("id", "BIGINT")
            .addColumn("d", "STRING")
            .partitionedBy("d")
            .clusterBy("id")
            .execute()
        ),
        lambda spark, root: spark.sql(
            f"CREATE TABLE delta.`{root}` (id BIGINT, d STRING) USING delta "
            "PARTITIONED BY (d) CLUSTER BY (id)"
        ),
    ],
    ids=["builder", "sql"],
)
def test_clustering_with_partitioning_is_refused(spark, tmp_path: Path, make) -> None:  # noqa: ANN001
    root = tmp_path / "t"
    with pytest.raises(Exception) as error:
        make(spark, str(root))
    assert code_of(error.value) == "DELTA_CLUSTER_BY_WITH_PARTITIONED_BY"
    assert not log.is_delta_table(str(root))


def test_what_delta_refuses_as_clustering_columns(spark, tmp_path: Path) -> None:
    def refused(*columns: str) -> str | None:
        builder = DeltaTable.create(spark).location(str(tmp_path / "t"))
        builder = builder.addColumn("a", "INT").addColumn("m", "MAP<STRING, INT>")
        with pytest.raises(Exception) as error:
            builder.clusterBy(*columns).execute()
        return code_of(error.value)

    assert refused("a", "a", "a", "a", "a") == "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS"
    assert refused("nope") == "DELTA_COLUMN_NOT_FOUND"
    assert refused("m") == "DELTA_CLUSTERING_COLUMN_MISSING_STATS"


PIPELINE = """
import dlt


@dlt.table(cluster_by=["kind"])
def events():
    return spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 20).load().selectExpr(
        "value AS id", "CAST(value % 3 AS STRING) AS kind"
    ).where("value < 20")


@dlt.table(cluster_by=["kind"])
def per_kind():
    return dlt.read("events").groupBy("kind").count()


dlt.create_streaming_table("mirror", cluster_by=["kind"])


@dlt.append_flow(target="mirror")
def mirrored():
    return dlt.read_stream("events")
"""

SQL = """
CREATE OR REFRESH MATERIALIZED VIEW kinds
CLUSTER BY (kind)
AS SELECT CAST(col1 AS STRING) AS kind, col2 AS n FROM VALUES (1, 10), (2, 20);
"""


def test_pipeline_tables_declared_clustered(spark, tmp_path: Path) -> None:
    """A streaming table and a materialized view (``@dlt.table(cluster_by=...)``) and a SQL
    ``CLUSTER BY`` view: created clustered, written, and refreshed again (the view's rerun
    overwrites through lakefeed's own commits)."""
    folder = write(tmp_path / "p", {"pipeline.py": PIPELINE, "kinds.sql": SQL})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    for _ in range(2):
        assert lf.run(folder, lakehouse=lakehouse, spark=spark).ok
        for name in ("events", "per_kind", "mirror", "kinds"):
            root = str(lakehouse.table_path(name))
            assert _clustered_by(root) == [["kind"]], name
    assert expected(str(lakehouse.table_path("kinds"))) == [("1", 10), ("2", 20)]
    events = expected(str(lakehouse.table_path("events")))
    assert sorted({row[0] for row in events}) == list(range(20))
    counts = dict(expected(str(lakehouse.table_path("per_kind"))))
    assert sum(counts.values()) == len(events)
    assert expected(str(lakehouse.table_path("mirror"))) == events


def test_sdp_tables_take_cluster_by(tmp_path: Path) -> None:
    text = (
        "from pyspark import pipelines as dp\n\n"
        "@dp.table(cluster_by=['id'])\ndef t():\n    return spark.range(3)\n\n"
        "@dp.materialized_view(cluster_by=['id'])\ndef v():\n    return spark.range(3)\n"
    )
    pipeline = load([write(tmp_path / "p", {"p.py": text})])
    assert [pipeline.datasets[n].cluster_by for n in ("t", "v")] == [["id"], ["id"]]


def test_cluster_by_auto_is_refused_naming_the_columns_form(tmp_path: Path) -> None:
    sql = "CREATE OR REFRESH STREAMING TABLE t\nCLUSTER BY AUTO\nAS SELECT * FROM STREAM s;\n"
    folder = write(tmp_path / "p", {"t.sql": sql})
    with pytest.raises(PipelineError) as error:
        load([folder])
    (problem,) = error.value.problems
    assert "[LAKEFEED:CLUSTERING_UNSUPPORTED]" in problem and "CLUSTER BY (col" in problem


KEYED = """
import lakefeed as lf


@lf.table(keys=["kind"], cluster_by=["kind"], table_properties=PROPERTIES)
def latest():
    return spark.readStream.schema("kind string, value long").parquet(spark.conf.get("landing"))
"""


def test_a_keyed_clustered_table_merges_with_deletion_vectors(spark, tmp_path: Path) -> None:
    """Upserts are MERGEs, which lakefeed commits into a clustered table itself only with
    deletion vectors: without them the run is refused when it starts, before any write."""
    landing = tmp_path / "landing"
    conf = {"landing": f"{landing}/*"}
    rows = [(str(value % 3), value) for value in range(3)]
    spark.createDataFrame(rows, "kind string, value long").write.parquet(str(landing / "1"))
    refused = write(tmp_path / "refused", {"p.py": KEYED.replace("PROPERTIES", "{}")})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    with pytest.raises(Exception, match="delta.enableDeletionVectors"):
        lf.run(refused, lakehouse=lakehouse, spark=spark, conf=conf)
    assert not lakehouse.table_path("latest").exists()
    on = '{"delta.enableDeletionVectors": "true"}'
    folder = write(tmp_path / "p", {"p.py": KEYED.replace("PROPERTIES", on)})
    assert lf.run(folder, lakehouse=lakehouse, spark=spark, conf=conf).ok
    more = [(str(value % 3), value) for value in range(3, 6)]
    spark.createDataFrame(more, "kind string, value long").write.parquet(str(landing / "2"))
    assert lf.run(folder, lakehouse=lakehouse, spark=spark, conf=conf).ok
    root = str(lakehouse.table_path("latest"))
    assert _clustered_by(root) == [["kind"]]
    assert expected(root) == [("0", 3), ("1", 4), ("2", 5)]
    newest = log.latest_version(root) or 0
    commits = [log.commit_actions(root, version) or [] for version in range(newest + 1)]
    merges = [a["commitInfo"] for c in commits for a in c if "commitInfo" in a]
    engines = {m["engineInfo"] for m in merges if m["operation"] == "MERGE"}
    assert engines == {"lakefeed"}  # lakefeed's own MERGE: delta-rs could not commit here
