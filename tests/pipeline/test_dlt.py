"""Databricks DLT pipeline files (``import dlt``) run unchanged; the shim exists only while
lakefeed loads a pipeline, so another ``dlt`` package (dlthub's) is never shadowed."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from lakefeed.lakehouse import Lakehouse
from lakefeed.pipeline import dlt_compat
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


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            'dlt.apply_changes(target="t", source="s", keys=["id"], sequence_by="s", once=True)',
            "once not supported",
        ),
        (
            '@dlt.table(spark_conf={"a": "b"}, path="/x")\ndef t():\n    return None',
            "path, spark_conf not supported",
        ),
    ],
)
def test_what_lakefeed_cannot_honour_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    folder = write(tmp_path / "p", {"p.py": "import dlt\n\n" + text + "\n"})
    with pytest.raises(PipelineError) as error:
        load([folder])
    (message,) = error.value.problems
    assert problem in message and "[LAKEFEED:DLT_UNSUPPORTED]" in message and "p.py:" in message
