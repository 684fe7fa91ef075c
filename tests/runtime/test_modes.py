"""Run modes on real Delta tables: SQL + Python in one pipeline, expectations in all three
actions, materialized views, backfill, and restart of a flow after a transient failure."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import load, table, write

GENERATOR = (
    'lf.source("iot", totalRows={rows}, rowsPerSecond=1000, devices=4, seed=1, '
    'startTime="2026-01-01T00:00:00Z", malformedRate=0.1, duplicateRate=0)'
)
RAW = "import lakefeed as lf\n\n@lf.table\ndef raw():\n    return " + GENERATOR.format(rows=200)
READINGS = """
-- SQL flows read the Python table; the MV reads the SQL table.
CREATE OR REFRESH STREAMING TABLE readings (
  CONSTRAINT parsed EXPECT (event_id IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT warm EXPECT (temperature > 20)
) COMMENT 'parsed readings'
AS SELECT r.event_id, r.device_id, r.temperature, offset
   FROM (SELECT from_json(value, 'event_id STRING, device_id STRING, temperature DOUBLE') AS r,
                offset
         FROM STREAM(raw));

CREATE MATERIALIZED VIEW per_device AS
SELECT device_id, count(*) AS n FROM readings GROUP BY device_id;
"""


@pytest.fixture(scope="module")
def mixed(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Lakehouse]:
    folder = write(tmp_path_factory.mktemp("mixed"), {"raw.py": RAW, "readings.sql": READINGS})
    lakehouse = Lakehouse.at(folder / "lakehouse")
    # pyspark's active session is one process-wide slot that any createDataFrame moves (a
    # foreachBatch does it on a query's cloned session): the run must not depend on it.
    spark.newSession().createDataFrame([(1,)], "x int")
    try:
        result = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="once")).run()
    finally:
        spark.createDataFrame([(1,)], "x int")
    assert result.ok
    return folder, lakehouse


def test_sql_and_python_flows_with_drop_and_warn(mixed: tuple[Path, Lakehouse]) -> None:
    _, lakehouse = mixed
    raw, readings = table(lakehouse, "raw"), table(lakehouse, "readings")
    quarantine = table(lakehouse, "readings_quarantine")
    assert raw.num_rows == 200
    assert readings.num_rows + quarantine.num_rows == 200
    assert quarantine.num_rows > 0 and readings["event_id"].null_count == 0
    assert all("parsed" in rules for rules in quarantine["_failed_rules"].to_pylist())
    # warn keeps failing rows
    assert pc.sum(pc.less_equal(readings["temperature"], 20)).as_py() > 0
    events = read_events(lakehouse.event_log_path, event_types=["expectations"])
    rules = [e["details"]["rules"] for e in events if e["flow"] == "readings"]
    assert sum(r["parsed"]["failed"] for r in rules) == quarantine.num_rows
    warm = sum(r["warm"]["failed"] for r in rules)
    assert warm >= pc.sum(pc.less_equal(readings["temperature"], 20)).as_py() > 0


def test_materialized_view_recomputed_in_batch(mixed: tuple[Path, Lakehouse]) -> None:
    _, lakehouse = mixed
    per_device = table(lakehouse, "per_device").to_pylist()
    expected = Counter(table(lakehouse, "readings")["device_id"].to_pylist())
    assert {row["device_id"]: row["n"] for row in per_device} == dict(expected)


def test_backfill_replaces_tables_with_the_same_result(
    spark, mixed: tuple[Path, Lakehouse]
) -> None:
    folder, lakehouse = mixed
    before = sorted(table(lakehouse, "readings").to_pylist(), key=str)
    result = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="backfill")).run()
    assert result.ok
    assert sorted(table(lakehouse, "readings").to_pylist(), key=str) == before
    assert table(lakehouse, "raw").num_rows == 200
    assert not lakehouse.checkpoint_path("readings").exists()
    # The checkpoints no longer describe the tables: streaming again needs a full refresh.
    with pytest.raises(PipelineError, match="has rows but its checkpoint"):
        PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="once")).run()


def test_expect_or_fail_stops_the_flow_before_commit(spark, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "strict",
        {
            "strict.py": "import lakefeed as lf\n\n"
            '@lf.table\n@lf.expect_or_fail("small_offset", "offset < 50")\n'
            "def strict():\n    return " + GENERATOR.format(rows=100)
        },
    )
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    with pytest.raises(PipelineError, match="flow 'strict' failed"):
        PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now")).run()
    assert table(lakehouse, "strict").num_rows == 0  # nothing of the failing batch committed
    events = read_events(lakehouse.event_log_path)
    failed = [e for e in events if e["event_type"] == "flow_failed"]
    assert len(failed) == 1 and "small_offset" in failed[0]["details"]["error"]
    assert failed[0]["details"]["traceback"]
    assert not [e for e in events if e["event_type"] == "flow_restart"]  # not transient


def test_transient_failure_restarts_with_backoff(spark, tmp_path: Path) -> None:
    marker = tmp_path / "fail-once"
    marker.write_text("x")
    folder = write(
        tmp_path / "flaky",
        {
            "flaky.py": "import os\nfrom pyspark.sql import functions as F\n"
            "import lakefeed as lf\n\n"
            "@F.udf('long')\n"
            "def flaky(offset):\n"
            f"    if os.path.exists({str(marker)!r}):\n"
            f"        os.remove({str(marker)!r})\n"
            "        raise ConnectionError('sink unreachable (transient)')\n"
            "    return offset\n\n"
            "@lf.table\ndef flaky_table():\n"
            "    return " + GENERATOR.format(rows=20) + ".select(flaky('offset').alias('o'))\n"
        },
    )
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    options = RunOptions(mode="available-now", restart_backoff=0.1)
    assert PipelineRunner(load([folder]), lakehouse, spark, options).run().ok
    assert sorted(table(lakehouse, "flaky_table")["o"].to_pylist()) == list(range(20))
    kinds = [e["event_type"] for e in read_events(lakehouse.event_log_path)]
    assert kinds.count("flow_failed") == 1 and kinds.count("flow_restart") == 1
