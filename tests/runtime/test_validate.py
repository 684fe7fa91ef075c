"""Misuse is refused before any query starts, with a message that says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.validate import validate
from tests.pipeline.support import load, write

HEADER = "from pyspark.sql import functions as F\nimport lakefeed as lf\n\n"
SOURCE = 'lf.source("iot", rowsPerSecond=10, totalRows=100)'

MISUSE = (
    HEADER
    + f"""
@lf.table
def raw():
    return {SOURCE}.withColumn("event_time", F.col("ingest_time"))

@lf.table(output_mode="append")
def counts_append():
    return lf.read_stream("raw").groupBy("device_id").count()

@lf.table(output_mode="update")
def counts_update():
    return lf.read_stream("raw").groupBy("device_id").count()

@lf.table
def counts_auto():
    return lf.read_stream("raw").groupBy("device_id").count()

@lf.table
def windows():
    return (lf.read_stream("raw").withWatermark("event_time", "1 minute")
            .groupBy(F.window("event_time", "1 minute")).count())

@lf.table
def orphan():
    return lf.read_stream("no_such_table")

@lf.table
def loop_a():
    return lf.read_stream("loop_b")

@lf.table
def loop_b():
    return lf.read_stream("loop_a")

@lf.materialized_view
def summary():
    return lf.read_stream("raw")

@lf.table
def batchy():
    return lf.read("raw")

@lf.table(partition_cols=["nope"])
def bad_partition():
    return lf.read_stream("raw")

@lf.table
@lf.expect("typo", "temprature > 0")
def bad_rule():
    return lf.read_stream("raw")

@lf.table
def broken():
    return lf.read_stream("raw").select("missing_column")

@lf.table(keys=["device_id"], table_properties={{"delta.enableRowTracking": "true"}})
def tracked_keys():
    return lf.read_stream("raw").groupBy("device_id").count()
"""
)


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory: pytest.TempPathFactory):
    folder = write(tmp_path_factory.mktemp("misuse"), {"pipeline.py": MISUSE})
    lakehouse = Lakehouse.at(folder / "lakehouse")
    # a state-memory setting Spark would reject at the first stateful task, inside it
    result = validate(load([folder], {"lakefeed.state.writeBufferRatio": "0.3"}), lakehouse, spark)
    assert spark.streams.active == []
    assert not (lakehouse.root / "tables").exists()  # validation writes nothing
    return result


def _problem(report, *fragments: str) -> str:
    matches = [p for p in report.problems if all(f in p for f in fragments)]
    assert matches, f"no problem with {fragments} in:\n" + "\n".join(report.problems)
    return matches[0]


def test_aggregation_in_append_mode_without_watermark(report) -> None:
    assert "withWatermark" in _problem(report, "'counts_append'", "needs a watermark")


def test_update_mode_into_delta(report) -> None:
    _problem(report, "'counts_update'", "output_mode='update' cannot write a Delta table")


def test_output_modes_picked_automatically(report) -> None:
    assert report.flows["counts_auto"].output_mode == "complete"
    assert report.flows["windows"].output_mode == "append"
    assert report.flows["raw"].output_mode == "append"
    assert any("'counts_auto'" in w and "complete mode" in w for w in report.warnings)


def test_unknown_reference_and_cycle(report) -> None:
    _problem(report, "'orphan' reads 'no_such_table'", "no flow in this pipeline defines")
    _problem(report, "cycle:", "loop_a", "loop_b")


def test_batch_and_stream_kinds_mismatch(report) -> None:
    _problem(report, "materialized view 'summary' returned a streaming DataFrame", "lf.read")
    _problem(report, "streaming table 'batchy' returned a batch DataFrame", "read_stream")


def test_bad_partition_rule_and_function(report) -> None:
    _problem(report, "'bad_partition'", "partition column 'nope'")
    _problem(report, "'bad_rule'", "expectation 'typo'", "temprature")
    assert "pipeline.py" in _problem(report, "'broken' failed to evaluate", "missing_column")


def test_a_keyed_row_tracking_table_needs_deletion_vectors(report) -> None:
    """Its MERGEs keep row ids only where lakefeed commits them: with deletion vectors."""
    _problem(
        report, "'tracked_keys'", "row-tracking table updated by MERGE", "enableDeletionVectors"
    )


def test_state_memory_misuse_is_a_problem_with_its_fix(report) -> None:
    problem = _problem(report, "STATE_MEMORY", "lakefeed.state.writeBufferRatio")
    assert "set lakefeed.state.memory" in problem


def test_valid_flows_are_not_blamed(report) -> None:
    blamed = " ".join(report.problems)
    for name in ("'raw'", "'windows'", "'counts_auto'"):
        assert name not in blamed


def test_sql_and_python_graph(spark, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "mixed",
        {
            "bronze.py": HEADER + f"@lf.table\ndef bronze():\n    return {SOURCE}\n",
            "silver.sql": "CREATE STREAMING TABLE silver AS SELECT * FROM STREAM(bronze);\n"
            "CREATE MATERIALIZED VIEW per_device AS "
            "SELECT device_id, count(*) AS n FROM silver GROUP BY device_id",
        },
    )
    result = validate(load([folder]), Lakehouse.at(tmp_path / "lh"), spark)
    assert result.problems == []
    assert result.order == ["bronze", "silver", "per_device"]
    assert result.flows["per_device"].output_mode == "overwrite"


def test_cli_validate_exit_codes(spark, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from lakefeed.cli.main import cli

    body = "():\n    return " + SOURCE + "\n"
    bad = write(
        tmp_path / "bad", {"p.py": HEADER + "@lf.table(output_mode='update')\ndef t" + body}
    )
    good = write(tmp_path / "good", {"p.py": HEADER + "@lf.table\ndef t" + body})
    lakehouse = ["--lakehouse", str(tmp_path / "lh")]
    refused = CliRunner().invoke(cli, ["validate", str(bad), *lakehouse])
    assert refused.exit_code == 2
    assert "cannot write a Delta table" in refused.output
    accepted = CliRunner().invoke(cli, ["validate", str(good), *lakehouse])
    assert accepted.exit_code == 0, accepted.output
    assert "pipeline is valid" in accepted.output and "append" in accepted.output


def test_unknown_delta_table_properties_are_refused_when_the_pipeline_loads(
    tmp_path: Path,
) -> None:
    """Delta refuses keys under ``delta.`` it does not know; other keys are the user's."""
    from lakefeed import load_pipeline
    from lakefeed.delta.properties import UNKNOWN
    from lakefeed.pipeline.graph import PipelineError

    folder = write(
        tmp_path / "p",
        {
            "a.py": (
                "import lakefeed as lf\n\n"
                "@lf.table(table_properties={'delta.appendOnyl': 'true', 'quality': 'gold',\n"
                "                            'delta.feature.deletionVectors': 'supported',\n"
                "                            'delta.APPENDONLY': 'false'})\n"
                "def a():\n    return lf.source('iot')\n"
            ),
            "b.sql": (
                "CREATE OR REFRESH STREAMING TABLE b\n"
                "  TBLPROPERTIES ('delta.logRetention' = '30 days', 'owner' = 'me')\n"
                "AS SELECT * FROM STREAM(a);\n"
            ),
        },
    )
    with pytest.raises(PipelineError) as caught:
        load_pipeline([folder])
    a, b = sorted(caught.value.problems)
    assert f"[LAKEFEED:{UNKNOWN}]" in a and f"{folder / 'a.py'}:" in a
    assert "'delta.appendOnyl'" not in a and "delta.appendOnyl (" in a
    assert "did you mean delta.appendOnly?" in a and "quality" not in a
    assert "delta.logRetention " in b and "delta.logRetentionDuration" in b
    good = write(
        tmp_path / "good",
        {
            "c.py": "import lakefeed as lf\n\n@lf.table(table_properties={'delta.appendOnly': "
            "'true', 'team': 'x'})\ndef c():\n    return lf.source('iot')\n"
        },
    )
    assert load_pipeline([good]).datasets["c"].table_properties["team"] == "x"


def test_table_properties_turning_on_refused_features_are_refused_when_the_pipeline_loads(
    tmp_path: Path,
) -> None:
    """As for DeltaTable.create's properties: delta-rs would record ``delta.feature.*``
    without changing the protocol. Row tracking is turned on (lakefeed assigns row ids)."""
    from lakefeed import load_pipeline
    from lakefeed.delta.properties import UNSUPPORTED
    from lakefeed.pipeline.graph import PipelineError

    table = (
        "import lakefeed as lf\n\n@lf.table(table_properties={%s})\n"
        "def a():\n    return lf.source('iot')\n"
    )
    refused = write(tmp_path / "p", {"a.py": table % "'delta.feature.appendOnly': 'supported'"})
    with pytest.raises(PipelineError) as caught:
        load_pipeline([refused])
    (problem,) = caught.value.problems
    assert f"[LAKEFEED:{UNSUPPORTED}]" in problem and "delta.feature.appendOnly" in problem
    tracked = write(tmp_path / "q", {"a.py": table % "'delta.enableRowTracking': 'true'"})
    assert load_pipeline([tracked]).datasets["a"].table_properties == {
        "delta.enableRowTracking": "true"
    }
