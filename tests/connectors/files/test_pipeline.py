"""examples/file_ingest through the pipeline runtime: available-now, evolution, quarantine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakefeed import load_pipeline
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import set_config
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.support.delta import table

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "file_ingest"
sys.path.insert(0, str(EXAMPLE))
from land import land_wave  # noqa: E402


@pytest.mark.compat  # settles the schema with pyspark's readStream.format("cloudFiles")
def test_example_available_now_with_a_field_added_later(spark, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    assert land_wave(landing, 1) == 200
    # The stream settled on wave 1's schema before wave 2 (with `coupon`) arrived.
    spark.readStream.format("cloudFiles").options(
        **{
            "cloudFiles.format": "json",
            "cloudFiles.inferColumnTypes": "true",
            "cloudFiles.schemaLocation": str(lakehouse.schema_path("bronze_orders")),
        }
    ).load(str(landing))
    assert land_wave(landing, 2) == 198

    set_config({"files.landing": str(landing), "files.maxFilesPerTrigger": "4"})
    pipeline = load_pipeline([EXAMPLE / "pipeline.py"])
    options = RunOptions(mode="available-now", restart_backoff=0.5)
    result = PipelineRunner(pipeline, lakehouse, spark, options).run()
    assert result.ok, result

    bronze = table(lakehouse, "bronze_orders")
    assert bronze.num_rows == 400  # every line of every file once, malformed ones included
    assert "coupon" in bronze.column_names
    assert pc.count_distinct(bronze["source_file"]).as_py() == 8
    rescued = [json.loads(x) for x in bronze["_rescued_data"].to_pylist() if x]
    assert sorted(r["_corrupt_record"][:8] for r in rescued) == ["not json", '{"order_']
    assert all(r["_file_path"].endswith("orders-2-0.json") for r in rescued)
    silver = table(lakehouse, "silver_orders")
    quarantine = table(lakehouse, "silver_orders_quarantine")
    assert silver.num_rows == 398 and quarantine.num_rows == 2
    assert pc.count_distinct(silver["order_id"]).as_py() == 398

    failures = read_events(lakehouse.event_log_path, event_types=["flow_failed"])
    errors = [event["details"]["error"] for event in failures]
    assert any("new columns ['coupon']" in e for e in errors), errors


SKIPPING_PIPELINE = """
import lakefeed as lf


@lf.table
def bronze_readings():
    landing = lf.config("landing")
    return lf.read_files(landing, "parquet", schema="id BIGINT", ignoreCorruptFiles=True)
"""


def test_a_skipped_corrupt_file_is_an_event_naming_file_and_error(spark, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    pq.write_table(pa.table({"id": [1, 2, 3]}), landing / "good.parquet")
    (landing / "broken.parquet").write_bytes(b"PAR1 this is not parquet")
    (tmp_path / "pipeline.py").write_text(SKIPPING_PIPELINE)
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    set_config({"landing": str(landing)})
    pipeline = load_pipeline([tmp_path / "pipeline.py"])
    for _ in range(2):  # the second run finds nothing new and reports nothing again
        result = PipelineRunner(pipeline, lakehouse, spark, RunOptions("available-now")).run()
        assert result.ok, result

    assert table(lakehouse, "bronze_readings")["id"].to_pylist() == [1, 2, 3]
    events = read_events(lakehouse.event_log_path, event_types=["file_skipped"])
    assert len(events) == 1, events
    event = events[0]
    assert event["flow"] == "bronze_readings" and event["level"] == "WARN"
    assert event["details"]["path"] == str(landing / "broken.parquet")
    assert "magic bytes not found" in event["details"]["error"]
    assert event["message"].startswith(f"bronze_readings: skipped unreadable file {landing}/broken")
    assert event["details"]["batch_id"] == 0
