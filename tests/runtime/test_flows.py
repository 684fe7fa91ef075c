"""Several flows into one streaming table (``create_streaming_table`` + ``append_flow``):
each flow its own checkpoint, a ``once`` backfill appended once, and the mistakes refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline import guard
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import load, table, write

SOURCE = (
    'lf.source("iot", totalRows={rows}, rowsPerSecond=1000, devices=4, seed={seed}, '
    'startTime="2026-01-01T00:00:00Z", malformedRate=0, duplicateRate=0).select("value")'
)
FLOWS = f"""
import lakefeed as lf
from pyspark.sql import functions as F

lf.create_streaming_table("events", comment="two regions", expect_all={{"has_value":
    "value IS NOT NULL"}})

@lf.append_flow(target="events")
def east():
    return {SOURCE.format(rows=100, seed=1)}.withColumn("region", F.lit("east"))

@lf.append_flow(target="events", name="west_flow")
def west():
    return {SOURCE.format(rows=60, seed=2)}.withColumn("region", F.lit("west"))

@lf.append_flow(target="events", once=True)
def history():
    return {SOURCE.format(rows=30, seed=3)}.withColumn("region", F.lit("old"))

@lf.table
def east_only():
    return lf.read_stream("events").where("region = 'east'")
"""


def _run(folder: Path, lakehouse: Lakehouse, spark, **options) -> None:  # noqa: ANN001
    result = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(**options)).run()
    assert result.ok


def _regions(lakehouse: Lakehouse) -> dict[str, int]:
    regions = table(lakehouse, "events")["region"].to_pylist()
    return {r: regions.count(r) for r in sorted(set(regions))}


def test_flows_fill_one_table_each_with_its_checkpoint(spark, tmp_path: Path) -> None:
    import lakefeed as lf

    folder = write(tmp_path / "p", {"flows.py": FLOWS})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    _run(folder, lakehouse, spark, mode="available-now")
    assert _regions(lakehouse) == {"east": 100, "old": 30, "west": 60}
    assert table(lakehouse, "east_only").num_rows == 100
    for flow in ("east", "west_flow"):
        identity = guard.read_identity(lakehouse.checkpoint_path(flow))
        assert identity is not None and (identity.flow, identity.target) == (flow, "events")
    assert not lakehouse.checkpoint_path("events").exists()
    started = read_events(lakehouse.event_log_path, event_types=["flow_start"])
    assert {e["flow"]: e["details"]["target"] for e in started}.items() >= {
        ("east", str(lakehouse.table_path("events"))),
        ("west_flow", str(lakehouse.table_path("events"))),
    }

    # Again: nothing new, and the once flow is not repeated.
    _run(folder, lakehouse, spark, mode="available-now")
    assert _regions(lakehouse) == {"east": 100, "old": 30, "west": 60}
    # verify recomputes each flow over the input its own checkpoint committed
    check = lf.verify(folder, lakehouse=lakehouse.root, spark=spark, run_first=False)
    assert check.ok and check.table("events").batch_rows == 190, check.tables

    # A full refresh of the table runs the once flow again, exactly once.
    _run(folder, lakehouse, spark, mode="available-now", full_refresh=("events", "east_only"))
    assert _regions(lakehouse) == {"east": 100, "old": 30, "west": 60}


def test_backfill_unions_every_flow(spark, tmp_path: Path) -> None:
    folder = write(tmp_path / "p", {"flows.py": FLOWS})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    _run(folder, lakehouse, spark, mode="backfill")
    assert _regions(lakehouse) == {"east": 100, "old": 30, "west": 60}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            '@lf.append_flow(target="nowhere")\ndef f():\n    return None\n',
            "appends to 'nowhere', which is not declared",
        ),
        (
            "@lf.table\ndef t():\n    return None\n\n"
            '@lf.append_flow(target="t")\ndef f():\n    return None\n',
            "appends to 't', which has its own query",
        ),
        ('lf.create_streaming_table("t")\n', "streaming table 't'"),
        (
            'lf.create_streaming_table("t")\nlf.create_streaming_table("u")\n'
            '@lf.append_flow(target="t", name="u")\ndef f():\n    return None\n',
            "has the name of a dataset",
        ),
    ],
)
def test_flow_mistakes_are_refused_at_load(tmp_path: Path, text: str, problem: str) -> None:
    folder = write(tmp_path / "p", {"p.py": "import lakefeed as lf\n\n" + text})
    with pytest.raises(PipelineError) as error:
        load([folder])
    assert any(problem in p for p in error.value.problems), error.value.problems


def test_validate_lists_each_flow_and_checks_once_flows(spark, tmp_path: Path) -> None:
    import lakefeed as lf

    broken = FLOWS + (
        '\n@lf.append_flow(target="events", once=True)\n'
        "def broken():\n    return lf.read('no_such_table')\n"
    )
    good = lf.validate(write(tmp_path / "good", {"f.py": FLOWS}), lakehouse=tmp_path, spark=spark)
    assert good.ok, good.problems
    assert [f.name for f in good.flows] == ["east", "west_flow", "east_only"]
    assert {"from": "events", "to": "east_only"} in good.to_dict()["edges"]
    bad = lf.validate(write(tmp_path / "bad", {"f.py": broken}), lakehouse=tmp_path, spark=spark)
    assert any("no_such_table" in p for p in bad.problems), bad.problems


def test_a_declared_table_is_located_in_the_pipeline_file(tmp_path: Path) -> None:
    text = "import dlt\n\n\ndlt.create_streaming_table('t')\n"
    folder = write(tmp_path / "p", {"p.py": text})
    with pytest.raises(PipelineError) as error:
        load([folder])
    assert f"{folder / 'p.py'}:4" in error.value.problems[0]


def test_a_new_flow_may_join_a_filled_table_but_a_lost_checkpoint_is_refused(
    spark, tmp_path: Path
) -> None:
    import shutil

    folder = write(tmp_path / "p", {"flows.py": FLOWS})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    _run(folder, lakehouse, spark, mode="once")
    north = (
        '\n@lf.append_flow(target="events")\ndef north():\n    return '
        + SOURCE.format(rows=20, seed=4)
        + '.withColumn("region", F.lit("north"))\n'
    )
    write(folder, {"flows.py": FLOWS + north})
    _run(folder, lakehouse, spark, mode="once")
    assert _regions(lakehouse) == {"east": 100, "north": 20, "old": 30, "west": 60}

    shutil.rmtree(lakehouse.checkpoint_path("east"))
    with pytest.raises(PipelineError) as error:
        _run(folder, lakehouse, spark, mode="once")
    assert "flow 'east'" in str(error.value) and "checkpoint" in str(error.value)
    assert _regions(lakehouse)["east"] == 100


def test_continuous_runs_every_flow_at_once(spark, tmp_path: Path) -> None:
    folder = write(tmp_path / "p", {"flows.py": FLOWS})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    _run(folder, lakehouse, spark, mode="continuous", duration=25, trigger_interval="1 second")
    assert _regions(lakehouse) == {"east": 100, "old": 30, "west": 60}
    stopped = read_events(lakehouse.event_log_path, event_types=["flow_stop"])
    assert {"east", "west_flow", "history"} <= {e["flow"] for e in stopped}


def test_version_guard_checks_each_flow_by_its_own_query_id(tmp_path: Path) -> None:
    """Each append flow commits its own Delta txn (app id = its query id): a table that lost
    one flow's batches is behind for that flow, and the fix names the table to refresh."""
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    from lakefeed.core.errors import DataLossRiskError

    target = tmp_path / "events"
    flows = []
    for flow in ("east", "west"):
        checkpoint = tmp_path / "checkpoints" / flow
        for folder in ("offsets", "commits"):
            (checkpoint / folder).mkdir(parents=True)
        (checkpoint / "metadata").write_text(f'{{"id":"query-{flow}"}}')
        (checkpoint / "commits" / "0").write_text("v1\n{}")
        txn = CommitProperties(app_transactions=[Transaction(f"query-{flow}", 0)])
        write_deltalake(str(target), pa.table({"x": [1]}), mode="append", commit_properties=txn)
        flows.append(guard.Flow(flow, checkpoint, ("events",)))
    tables = {"events": target}
    guard.check_versions(flows, tables, [])
    (target / "_delta_log" / f"{1:020d}.json").unlink()  # west's batch 0 is lost
    assert [(b.table, b.flow) for b in guard.tables_behind(flows, tables)] == [("events", "west")]
    with pytest.raises(DataLossRiskError, match="--full-refresh events`") as refused:
        guard.check_versions(flows, tables, [])
    assert refused.value.code == "TABLE_BEHIND"
    guard.check_versions(flows, tables, ["events"])  # both flows start over with the table
