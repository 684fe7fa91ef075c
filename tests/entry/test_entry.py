"""``lakefeed.run`` / ``validate`` / ``verify`` from Python, and the CLI over the same functions:
typed results, table comments and properties written to Delta, ``validate --json``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

import lakefeed as lf
from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import table as delta_table
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.results import FlowStatus
from tests.pipeline.support import write
from tests.support.delta import table

SOURCE = (
    'lf.source("iot", rowsPerSecond=10, totalRows=120, devices=4, '
    'startTime="2026-01-01T00:00:00Z", lateRate=0, duplicateRate=0, malformedRate=0)'
)
FLOWS = f"""
import lakefeed as lf

@lf.table(comment="raw readings", table_properties={{"quality": "bronze", "owner": "iot team"}})
def raw():
    return {SOURCE}
"""
SQL = """
CREATE OR REFRESH STREAMING TABLE copied
  COMMENT 'it''s a copy'
  TBLPROPERTIES ('quality' = 'silver', 'delta.appendOnly' = 'true')
AS SELECT * FROM STREAM(raw);

CREATE OR REFRESH MATERIALIZED VIEW per_device
  TBLPROPERTIES ('quality' = 'gold')
  COMMENT 'rows per device'
AS SELECT device_id, count(*) AS n FROM copied GROUP BY device_id;
"""


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    return write(tmp_path / "pipe", {"flows.py": FLOWS, "more.sql": SQL})


def _rows(lakehouse: Lakehouse, name: str) -> int:
    return table(lakehouse, name).num_rows


def _assert_declared_metadata(lakehouse: Lakehouse) -> None:
    expected = {
        "raw": ("raw readings", {"quality": "bronze", "owner": "iot team"}),
        "copied": ("it's a copy", {"quality": "silver", "delta.appendOnly": "true"}),
        "per_device": ("rows per device", {"quality": "gold"}),
    }
    for name, (comment, properties) in expected.items():
        metadata = DeltaTable(str(lakehouse.table_path(name))).metadata()
        assert metadata.description == comment
        assert metadata.configuration == properties
        # Declared again on the next run: already so, nothing committed.
        assert not delta_table.describe(lakehouse.table_path(name), comment, properties)
    shown = CliRunner().invoke(cli, ["table", "info", str(lakehouse.table_path("copied"))])
    assert shown.exit_code == 0, shown.output
    assert "it's a copy" in shown.output
    assert "property quality" in shown.output and "silver" in shown.output
    assert "property delta.appendOnly" in shown.output


def test_run_returns_each_flow_its_rows_and_writes_the_declared_metadata(
    spark, pipeline: Path, lakehouse: Lakehouse
) -> None:
    result = lf.run(pipeline, lakehouse=lakehouse.root, spark=spark)
    assert isinstance(result, lf.RunResult) and result.ok and result.reason == "completed"
    assert result.mode is lf.RunMode.AVAILABLE_NOW and result.pipeline == "pipe"
    assert [f.name for f in result.flows] == ["raw", "copied", "per_device"]
    assert {f.status for f in result.flows} == {FlowStatus.COMPLETED}
    assert result.flow("copied").kind is lf.DatasetKind.STREAMING_TABLE
    assert result.flow("per_device").output_mode == "overwrite"
    assert result.flow("raw").rows_written == _rows(lakehouse, "raw") == 120
    assert result.flow("copied").rows_written == 120
    assert result.flow("per_device").rows_written == _rows(lakehouse, "per_device") == 4

    _assert_declared_metadata(lakehouse)

    changed = FLOWS.replace('comment="raw readings"', 'comment="raw, as sent"')
    (pipeline / "flows.py").write_text(changed.replace('"bronze"', '"landing"'))
    again = lf.run([str(pipeline)], lakehouse=lakehouse, spark=spark, mode="available-now")
    # Nothing new upstream; the materialized view is recomputed (rewritten) again.
    assert [f.rows_written for f in again.flows] == [0, 0, 4]
    assert again.run_id != result.run_id
    raw = DeltaTable(str(lakehouse.table_path("raw"))).metadata()
    assert raw.description == "raw, as sent"
    assert raw.configuration == {"quality": "landing", "owner": "iot team"}


def test_backfill_writes_the_declared_metadata_too(
    spark, pipeline: Path, lakehouse: Lakehouse
) -> None:
    result = lf.run(pipeline, lakehouse=lakehouse, spark=spark, mode="backfill")
    assert result.mode is lf.RunMode.BACKFILL and result.flow("raw").rows_written == 120
    raw = DeltaTable(str(lakehouse.table_path("raw"))).metadata()
    assert raw.description == "raw readings" and raw.configuration["quality"] == "bronze"


def test_verify_compares_each_table(spark, pipeline: Path, lakehouse: Lakehouse) -> None:
    result = lf.verify(pipeline, lakehouse=lakehouse, spark=spark)
    assert isinstance(result, lf.VerifyResult) and result.ok
    assert [t.table for t in result.tables] == ["raw", "copied", "per_device"]
    assert result.table("raw").stream_rows == result.table("raw").batch_rows == 120


def test_run_refuses_a_pipeline_that_cannot_start(spark, tmp_path: Path) -> None:
    bad = write(
        tmp_path / "bad",
        {"p.py": FLOWS.replace("@lf.table(", "@lf.table(output_mode='update', ")},
    )
    with pytest.raises(PipelineError, match="cannot write a Delta table"):
        lf.run(bad, lakehouse=tmp_path / "lh", spark=spark)
    with pytest.raises(PipelineError, match="unknown mode 'sometimes'"):
        lf.run(bad, lakehouse=tmp_path / "lh", spark=spark, mode="sometimes")


def test_validate_returns_the_graph(spark, pipeline: Path, lakehouse: Lakehouse) -> None:
    result = lf.validate(pipeline, lakehouse=lakehouse, spark=spark)
    assert isinstance(result, lf.ValidationResult) and result.ok
    assert result.order == ("raw", "copied", "per_device")
    assert [(e.source, e.target) for e in result.edges] == [
        ("raw", "copied"),
        ("copied", "per_device"),
    ]
    flows = {f.name: f for f in result.flows}
    assert flows["per_device"].output_mode == "overwrite" and not flows["raw"].aggregate
    datasets = {d.name: d for d in result.datasets}
    assert datasets["copied"].comment == "it's a copy"
    assert datasets["raw"].source.endswith("flows.py:4")


def test_validate_json_for_orchestrators(spark, pipeline: Path, lakehouse: Lakehouse) -> None:
    out = CliRunner().invoke(
        cli, ["validate", str(pipeline), "--json", "--lakehouse", str(lakehouse.root)]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert list(doc) == [
        "format",
        "pipeline",
        "valid",
        "datasets",
        "flows",
        "edges",
        "order",
        "problems",
        "warnings",
        "connections",
    ]
    assert doc["connections"] == []  # filled by --check-connections
    assert doc["format"] == 1 and doc["valid"] is True and doc["problems"] == []
    assert doc["edges"] == [{"from": "raw", "to": "copied"}, {"from": "copied", "to": "per_device"}]
    raw = next(d for d in doc["datasets"] if d["name"] == "raw")
    assert raw == {
        "name": "raw",
        "kind": "table",
        "source": raw["source"],
        "comment": "raw readings",
        "partition_cols": [],
        "table_properties": {"quality": "bronze", "owner": "iot team"},
        "expectations": [],
        "reads": [],
    }
    assert doc["flows"][0] == {
        "name": "raw",
        "kind": "table",
        "output_mode": "append",
        "streaming": True,
        "aggregate": False,
        "watermark": False,
        "stateful": [],
    }
    assert [f["output_mode"] for f in doc["flows"]] == ["append", "append", "overwrite"]


def test_validate_json_lists_problems_and_exits_2(spark, tmp_path: Path) -> None:
    bad = write(
        tmp_path / "bad", {"p.py": FLOWS.replace("@lf.table(", "@lf.table(output_mode='update', ")}
    )
    out = CliRunner().invoke(cli, ["validate", str(bad), "--json", "--lakehouse", str(tmp_path)])
    assert out.exit_code == 2
    doc = json.loads(out.stdout)
    assert doc["valid"] is False and "cannot write a Delta table" in doc["problems"][0]
    assert doc["flows"][0]["output_mode"] is None


def test_validate_json_of_a_pipeline_that_does_not_load(tmp_path: Path) -> None:
    broken = write(tmp_path / "broken", {"p.py": "import lakefeed as lf\n\ndef oops(:\n"})
    out = CliRunner().invoke(cli, ["validate", str(broken), "--json"])
    assert out.exit_code == 2
    doc = json.loads(out.stdout)
    assert doc["pipeline"] == "broken" and doc["valid"] is False and doc["datasets"] == []
    assert "p.py:3" in doc["problems"][0]


@pytest.mark.slow  # a subprocess pipeline run: its own Spark
def test_cli_run_goes_through_lakefeed_run(tmp_path: Path) -> None:
    """The command prints the typed result: each flow's status and rows written."""
    one_flow = write(tmp_path / "one", {"flows.py": FLOWS})
    done = subprocess.run(
        [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", "run", str(one_flow)]
        + ["--mode", "once", "--lakehouse", str(tmp_path / "lh"), "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "raw: completed, 120 rows written" in done.stderr


def test_a_failed_flow_is_reported_with_its_error(spark, tmp_path: Path) -> None:
    strict = write(
        tmp_path / "strict",
        {
            "p.py": "import lakefeed as lf\n\n@lf.table\n"
            '@lf.expect_or_fail("no_device", "device_id IS NULL")\n'
            f"def strict():\n    return {SOURCE}\n"
        },
    )
    result = lf.run(
        strict,
        lakehouse=tmp_path / "lh",
        spark=spark,
        mode=lf.RunMode.CONTINUOUS,
        trigger_interval="1 second",
        duration=240,
        max_restarts=0,
    )
    assert result.reason == "every flow failed" and not result.ok
    flow = result.flow("strict")
    assert flow.status is FlowStatus.FAILED and flow.rows_written == 0
    assert flow.error is not None and "no_device" in flow.error


def test_validate_without_files_is_a_problem_not_a_crash() -> None:
    result = lf.validate([])
    assert not result.ok and result.pipeline == "pipeline"
    assert "no .py or .sql pipeline files" in result.problems[0]
