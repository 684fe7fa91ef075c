"""Databricks DLT pipeline files (``import dlt``) run unchanged; the shim exists only while
lakefeed loads a pipeline, so another ``dlt`` package (dlthub's) is never shadowed."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from lakefeed.compat import dlt as dlt_compat
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.entry import SURFACES
from lakefeed.pipeline import loader
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import load, table, write

# Written as the DLT docs write pipelines: `spark` is given, `import dlt`, batch reads make
# materialized views and stream reads streaming tables.
DLT_PIPELINE = """
import dlt
from pyspark.sql.functions import col, from_json

SCHEMA = "event_id STRING, device_id STRING, temperature DOUBLE"


@dlt.table(comment="Raw IoT readings", table_properties={"quality": "bronze"})
def readings_raw():
    return (
        spark.readStream.format("lakefeed_iot")
        .option("totalRows", 300)
        .option("rowsPerSecond", 1000)
        .option("devices", 4)
        .option("seed", 7)
        .option("startTime", "2026-01-01T00:00:00Z")
        .option("malformedRate", 0.1)
        .option("duplicateRate", 0)
        .load()
    )


@dlt.view
def readings_parsed():
    parsed = dlt.read_stream("readings_raw").select(from_json("value", SCHEMA).alias("r"))
    return parsed.select("r.*")


@dlt.table(comment="Readings that parse")
@dlt.expect_all_or_drop({"has_id": "event_id IS NOT NULL"})
@dlt.expect("warm", "temperature > 20")
def readings_clean():
    return dlt.read_stream("readings_parsed")


@dlt.table(comment="Readings per device")
def device_counts():
    return dlt.read("readings_clean").groupBy("device_id").count()


dlt.create_streaming_table("all_devices", comment="every device, from two flows")


@dlt.append_flow(target="all_devices")
def from_clean():
    return dlt.read_stream("readings_clean").select("device_id")


@dlt.append_flow(target="all_devices", once=True)
def seed_devices():
    return spark.createDataFrame([("seed",)], "device_id STRING")
"""


def test_a_dlt_pipeline_runs_unchanged(spark, tmp_path: Path) -> None:
    folder = write(tmp_path / "p", {"pipeline.py": DLT_PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    pipeline = load([folder])
    result = PipelineRunner(pipeline, lakehouse, spark, RunOptions(mode="available-now")).run()
    assert result.ok
    raw, clean = table(lakehouse, "readings_raw"), table(lakehouse, "readings_clean")
    quarantine = table(lakehouse, "readings_clean_quarantine")
    assert raw.num_rows == 300
    assert clean.num_rows + quarantine.num_rows == 300 and quarantine.num_rows > 0
    assert pipeline.datasets["device_counts"].kind == "materialized_view"
    assert pipeline.datasets["readings_clean"].kind == "table"
    counts = table(lakehouse, "device_counts").to_pylist()
    assert sum(row["count"] for row in counts) == clean.num_rows
    devices = table(lakehouse, "all_devices")["device_id"].to_pylist()
    assert devices.count("seed") == 1 and len(devices) == clean.num_rows + 1
    assert not lakehouse.table_path("readings_parsed").exists()  # a view is not stored


def test_the_shim_is_dlt_only_while_loading(tmp_path: Path) -> None:
    other = types.ModuleType("dlt")  # e.g. dlthub's package, imported by the user
    sys.modules["dlt"] = other
    try:
        folder = write(
            tmp_path / "p", {"p.py": "import dlt\n\n@dlt.view\ndef v():\n    return 1\n"}
        )
        load([folder])
        assert sys.modules["dlt"] is other
    finally:
        del sys.modules["dlt"]
    load([folder])
    assert "dlt" not in sys.modules or sys.modules["dlt"] is not dlt_compat


def test_the_loader_knows_no_surface_but_the_ones_it_is_given(tmp_path: Path) -> None:
    """The pipeline layer imports nothing of lakefeed.compat: ``import dlt`` works in a file
    because lakefeed.load_pipeline passes compat's surfaces to the loader."""
    code = (
        "import sys, lakefeed.pipeline.loader\n"
        "print(sorted(m for m in sys.modules if m.startswith('lakefeed.compat')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    folder = write(tmp_path / "p", {"p.py": "import dlt\n\n@dlt.view\ndef v():\n    return 1\n"})
    with pytest.raises(PipelineError, match="dlt"):
        loader.load_pipeline([folder], surfaces=())
    assert list(loader.load_pipeline([folder], surfaces=SURFACES).datasets) == ["v"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            'dlt.apply_changes_from_snapshot(target="t", source="s", keys=["id"], once=True)',
            "once not supported",
        ),
        (
            '@dlt.table(row_filter="ROW FILTER f ON (x)", cluster_by_auto=True)\n'
            "def t():\n    return None",
            "cluster_by_auto, row_filter not supported",
        ),
    ],
)
def test_what_lakefeed_cannot_honour_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    folder = write(tmp_path / "p", {"p.py": "import dlt\n\n" + text + "\n"})
    with pytest.raises(PipelineError) as error:
        load([folder])
    (message,) = error.value.problems
    assert problem in message and "[LAKEFEED:DLT_UNSUPPORTED]" in message and "p.py:" in message


SPARK_CONF_PIPELINE = """
import dlt
from pyspark.sql.functions import expr

RAW = dict(totalRows=40, rowsPerSecond=1000, devices=4, seed=7,
           startTime="2026-01-01T00:00:00Z", malformedRate=0, duplicateRate=0)


@dlt.table
def raw():
    return spark.readStream.format("lakefeed_iot").options(**RAW).load()


@dlt.table(spark_conf={"spark.sql.shuffle.partitions": "3"})
def per_device():
    return dlt.read_stream("raw").groupBy("device_id").count()


@dlt.table(spark_conf={"spark.sql.ansi.enabled": "false"})
def lenient():
    # Not a number: NULL without ANSI mode, an error with Spark 4's default
    return dlt.read("raw").select(expr("CAST(device_id AS INT)").alias("n"))


dlt.create_streaming_table("devices", spark_conf={"spark.sql.shuffle.partitions": "4"})


@dlt.append_flow(target="devices", spark_conf={"spark.sql.shuffle.partitions": "5"})
def own_conf():
    return dlt.read_stream("raw").select("device_id")


@dlt.append_flow(target="devices")
def target_conf():
    return dlt.read_stream("raw").select("device_id")
"""


def _shuffle_partitions(lakehouse: Lakehouse, flow: str) -> str:
    """The setting Spark recorded in the flow's first offset-log entry (it pins it there)."""
    lines = (lakehouse.checkpoint_path(flow) / "offsets" / "0").read_text().splitlines()
    return json.loads(lines[1])["conf"]["spark.sql.shuffle.partitions"]


def test_spark_conf_applies_to_its_table_or_flow_alone(spark, tmp_path: Path) -> None:
    """DLT's spark_conf: a table's settings for its query, a flow's own over its target's; the
    session keeps its own values."""
    folder = write(tmp_path / "p", {"pipeline.py": SPARK_CONF_PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    before = spark.conf.get("spark.sql.shuffle.partitions")
    result = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now"))
    assert result.run().ok
    assert _shuffle_partitions(lakehouse, "per_device") == "3"
    assert _shuffle_partitions(lakehouse, "own_conf") == "5"
    assert _shuffle_partitions(lakehouse, "target_conf") == "4"
    assert _shuffle_partitions(lakehouse, "raw") == before
    assert table(lakehouse, "lenient").column("n").to_pylist() == [None] * 40
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    assert spark.conf.get("spark.sql.shuffle.partitions") == before


def test_a_static_spark_conf_is_refused_before_anything_runs(spark, tmp_path: Path) -> None:
    conf = '{"spark.executor.memory": "1g"}'
    text = f"@dlt.table(spark_conf={conf})\ndef t():\n    return spark.range(1)\n"
    folder = write(tmp_path / "p", {"p.py": "import dlt\n\n" + text})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    with pytest.raises(PipelineError) as error:
        PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now")).run()
    message = " ".join(error.value.problems)
    assert "[SPARK_CONF_STATIC]" in message and "spark.executor.memory" in message
    assert not (lakehouse.root / "tables" / "t").exists()


SCHEMA_PIPELINE = """
import dlt
from pyspark.sql.functions import col, expr
from pyspark.sql.types import LongType, StringType, StructField, StructType

SCANS = [("p1", "Ann", "2026-01-05 10:00:00", 1), ("p2", None, "2026-01-06 11:00:00", 2)]


@dlt.table(
    comment="Parcels as the depot scanned them",
    schema='''
        parcel_id STRING NOT NULL COMMENT 'tracking code',
        sender STRING,
        scanned_at STRING,
        weight_g LONG,
        scan_weekday INT GENERATED ALWAYS AS (dayofweek(scanned_at)),
        CONSTRAINT pk PRIMARY KEY (parcel_id),
        CONSTRAINT positive_weight CHECK (weight_g > 0)
    ''',
    partition_cols=["scan_weekday"],
)
def parcels():
    rows = spark.createDataFrame(SCANS, "parcel_id STRING, sender STRING, "
                                 "scanned_at STRING, weight_g INT")
    return rows


@dlt.table(schema=StructType([StructField("parcel_id", StringType()),
                              StructField("scans", LongType()),
                              StructField("note", StringType())]))
def per_parcel():
    # reads the generated column the schema declares; leaves `note` out (NULL)
    return (dlt.read("parcels").groupBy("parcel_id").count()
            .select("parcel_id", col("count").alias("scans")))


@dlt.table(schema="parcel_id STRING")
def too_wide():
    return dlt.read("parcels").select("parcel_id", "scan_weekday")
"""


def test_a_declared_schema_shapes_the_table(spark, tmp_path: Path) -> None:
    """DLT's schema=: types, NOT NULL, comments, generated and partition columns and CHECK
    constraints go to the Delta table; the query's rows take that shape; a column the schema
    does not declare is refused before anything is written."""
    from deltalake import DeltaTable

    folder = write(tmp_path / "p", {"pipeline.py": SCHEMA_PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    with pytest.raises(PipelineError) as refused:
        PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now")).run()
    message = " ".join(refused.value.problems)
    assert "[SCHEMA_MISMATCH]" in message and "scan_weekday" in message, message
    assert not (lakehouse.root / "tables" / "parcels").exists()

    fixed = SCHEMA_PIPELINE.replace('"parcel_id", "scan_weekday"', '"parcel_id"')
    folder = write(tmp_path / "q", {"pipeline.py": fixed})
    result = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now"))
    assert result.run().ok
    parcels = DeltaTable(str(lakehouse.table_path("parcels")))
    fields = {f.name: f for f in parcels.schema().fields}
    assert list(fields) == [
        "parcel_id",
        "sender",
        "scanned_at",
        "weight_g",
        "scan_weekday",
    ]
    assert not fields["parcel_id"].nullable and fields["parcel_id"].metadata["comment"] == (
        "tracking code"
    )
    assert str(fields["weight_g"].type) == 'PrimitiveType("long")'
    generated = fields["scan_weekday"].metadata["delta.generationExpression"]
    assert generated == "dayofweek(scanned_at)"
    assert parcels.metadata().partition_columns == ["scan_weekday"]
    assert parcels.metadata().configuration["delta.constraints.positive_weight"] == "weight_g > 0"
    rows = sorted(table(lakehouse, "parcels").to_pylist(), key=lambda r: r["parcel_id"])
    assert [(r["parcel_id"], r["scan_weekday"]) for r in rows] == [("p1", 2), ("p2", 3)]
    per_parcel = sorted(table(lakehouse, "per_parcel").to_pylist(), key=str)
    assert per_parcel == [
        {"parcel_id": "p1", "scans": 1, "note": None},
        {"parcel_id": "p2", "scans": 1, "note": None},
    ]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ("id INT, CHECK (id > 0)", "has no name"),
        ("id INT, id STRING", "declared twice"),
        ("id INT DEFAULT 5", "lakefeed does not know"),
    ],
)
def test_a_schema_lakefeed_cannot_honour_is_refused_at_load(
    tmp_path: Path, schema: str, problem: str
) -> None:
    text = f'@dlt.table(schema="{schema}")\ndef t():\n    return None\n'
    folder = write(tmp_path / "p", {"p.py": "import dlt\n\n" + text})
    with pytest.raises(PipelineError) as error:
        load([folder])
    (message,) = error.value.problems
    assert problem in message and "SCHEMA_INVALID" in message and "p.py:" in message


IDENTITY_PIPELINE = """
import dlt


@dlt.table(schema="ticket BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY 10), "
                  "name STRING")
def tickets():
    return spark.createDataFrame([("a",), ("b",), ("c",)], "name STRING").coalesce(1)
"""


def test_a_declared_identity_column_is_assigned_by_the_write(spark, tmp_path: Path) -> None:
    """Issue 33: DLT's ``GENERATED ALWAYS AS IDENTITY`` in ``schema=``: the table is made with
    the identity column and the pipeline's write assigns its values."""
    from deltalake import DeltaTable

    folder = write(tmp_path / "p", {"pipeline.py": IDENTITY_PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now")).run()
    rows = sorted(table(lakehouse, "tickets").to_pylist(), key=lambda r: r["ticket"])
    assert rows == [
        {"ticket": 100, "name": "a"},
        {"ticket": 110, "name": "b"},
        {"ticket": 120, "name": "c"},
    ]
    delta = DeltaTable(str(lakehouse.root / "tables" / "tickets"))
    assert "identityColumns" in (delta.protocol().writer_features or [])
    field = next(f for f in delta.schema().fields if f.name == "ticket")
    assert int(field.metadata["delta.identity.highWaterMark"]) == 120


PRIVATE_PIPELINE = """
import dlt


@dlt.table(private=True)
def staged():
    return spark.range(3).withColumnRenamed("id", "n")


@dlt.table(temporary=True)
def scratch():
    return dlt.read("staged").selectExpr("n * 10 AS n")


@dlt.table
def published():
    return dlt.read("scratch")
"""


def test_private_tables_are_stored_but_not_published(spark, tmp_path: Path) -> None:
    """DLT's private=True / temporary=True: the pipeline's flows read the table; outside the
    pipeline its name does not resolve, and a catalog listing leaves it out."""
    from lakefeed.compat.delta_spark import DeltaTable
    from lakefeed.compat.delta_spark.tables import LAKEHOUSE_CONF

    folder = write(tmp_path / "p", {"pipeline.py": PRIVATE_PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    runner = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now"))
    assert runner.run().ok
    assert sorted(r["n"] for r in table(lakehouse, "published").to_pylist()) == [0, 10, 20]
    assert lakehouse.private_tables() == {"staged", "scratch"}
    assert lakehouse.published_table_names() == ["published"]
    spark.conf.set(LAKEHOUSE_CONF, str(lakehouse.root))
    try:
        assert DeltaTable.forName(spark, "published").toDF().count() == 3
        with pytest.raises(Exception, match="TABLE_PRIVATE"):
            DeltaTable.forName(spark, "staged")
        # published once the pipeline says so
        folder = write(
            tmp_path / "q", {"pipeline.py": PRIVATE_PIPELINE.replace("private=True", "")}
        )
        runner = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now"))
        assert runner.run().ok
        assert DeltaTable.forName(spark, "staged").toDF().count() == 3
    finally:
        spark.conf.unset(LAKEHOUSE_CONF)


PATH_PIPELINE = """
import dlt


@dlt.table(path=spark.conf.get("orders.path"))
def orders():
    return spark.range(3).withColumnRenamed("id", "n")


@dlt.table
def doubled():
    return dlt.read("orders").selectExpr("n * 2 AS n")
"""


def test_a_table_at_its_own_path(spark, tmp_path: Path) -> None:
    """DLT's path=: the data lives there, the table is still the pipeline's by name (reads,
    listing, verify, plan); moving it is refused unless it is fully refreshed."""
    from deltalake import DeltaTable

    import lakefeed as lf

    folder = write(tmp_path / "p", {"pipeline.py": PATH_PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    first, second = tmp_path / "external" / "orders", tmp_path / "elsewhere" / "orders"
    conf = {"orders.path": f"file://{first}"}
    assert lf.run(folder, lakehouse=lakehouse, conf=conf, spark=spark).ok
    assert sorted(DeltaTable(str(first)).to_pyarrow_table()["n"].to_pylist()) == [0, 1, 2]
    assert not (lakehouse.root / "tables" / "orders").exists()
    assert sorted(table(lakehouse, "doubled")["n"].to_pylist()) == [0, 2, 4]
    assert lakehouse.table_path("orders") == first
    assert lakehouse.table_names() == ["doubled", "orders"]
    checked = lf.verify(folder, lakehouse=lakehouse, conf=conf, spark=spark)
    assert {t.table for t in checked.tables} >= {"orders", "doubled"}, checked
    assert all(t.equal and t.stream_rows == 3 for t in checked.tables), checked
    assert lf.plan(folder, lakehouse=lakehouse, conf=conf, spark=spark).ok

    moved = {"orders.path": str(second)}
    with pytest.raises(Exception, match="TABLE_PATH_MOVED") as refused:
        lf.run(folder, lakehouse=lakehouse, conf=moved, spark=spark)
    assert "--full-refresh orders" in str(refused.value)
    assert not second.exists() and lakehouse.table_path("orders") == first
    again = lf.run(folder, lakehouse=lakehouse, conf=moved, spark=spark, full_refresh=["orders"])
    assert again.ok
    assert sorted(DeltaTable(str(second)).to_pyarrow_table()["n"].to_pylist()) == [0, 1, 2]
    assert not first.exists() and lakehouse.table_path("orders") == second


def test_a_relative_path_is_refused_at_load(tmp_path: Path) -> None:
    text = '@dlt.table(path="tables/t")\ndef t():\n    return None\n'
    folder = write(tmp_path / "p", {"p.py": "import dlt\n\n" + text})
    with pytest.raises(PipelineError) as error:
        load([folder])
    (message,) = error.value.problems
    assert "[LAKEFEED:TABLE_PATH_INVALID]" in message and "p.py:" in message


OPTIONS_PIPELINE = """
import dlt


@dlt.table
def a():
    return spark.readStream.format("delta").load(spark.conf.get("source.path"))


@dlt.table
def b():
    return spark.readStream.option("skipChangeCommits", "true").table("a")


@dlt.table
def c():
    return dlt.read_stream("a", skipChangeCommits=True)
"""


@pytest.mark.compat  # format("delta")
def test_reader_options_reach_a_pipeline_read(spark, tmp_path: Path) -> None:
    """DLT's documented way past an upstream DELETE: ``spark.readStream.option(
    "skipChangeCommits", "true").table(name)`` (and ``dlt.read_stream(name, **options)``)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    import lakefeed as lf

    source = tmp_path / "source"
    write_deltalake(str(source), pa.table({"n": [1, 2, 3]}))
    folder = write(tmp_path / "p", {"pipeline.py": OPTIONS_PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    conf = {"source.path": str(source)}
    assert lf.run(folder, lakehouse=lakehouse, conf=conf, spark=spark).ok
    DeltaTable(str(lakehouse.table_path("a"))).delete("n = 1")  # a change commit in `a`
    write_deltalake(str(source), pa.table({"n": [4]}), mode="append")
    assert lf.run(folder, lakehouse=lakehouse, conf=conf, spark=spark).ok
    for name in ("b", "c"):
        assert sorted(table(lakehouse, name)["n"].to_pylist()) == [1, 2, 3, 4], name
