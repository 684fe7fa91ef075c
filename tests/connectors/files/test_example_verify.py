"""examples/file_ingest, then ``lakefeed verify``: the batch side reads exactly the files the
stream committed (its file log), not what has landed since, also after a kill -9 mid-stream."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lakefeed import load_pipeline
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import set_config
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.support.crash import run_cli_with_kills, spark_commits
from tests.support.delta import table as read_table
from tests.support.verify import assert_verify_passes, conf_args

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "file_ingest"
sys.path.insert(0, str(EXAMPLE))
from land import land_wave  # noqa: E402


def _rows(lakehouse: Lakehouse, name: str) -> int:
    return read_table(lakehouse, name).num_rows


def test_verify_reads_only_the_committed_files(spark, tmp_path: Path) -> None:
    landing, lakehouse = tmp_path / "landing", Lakehouse.at(tmp_path / "lakehouse")
    land_wave(landing, 1)
    conf = {"files.landing": str(landing), "files.maxFilesPerTrigger": "2"}
    set_config(conf)
    try:
        pipeline = load_pipeline([EXAMPLE / "pipeline.py"])
        result = PipelineRunner(pipeline, lakehouse, spark, RunOptions("available-now")).run()
    finally:
        set_config({})
    assert result.ok, result
    assert _rows(lakehouse, "bronze_orders") == 200
    land_wave(landing, 2)  # landed after the run: no checkpoint has committed these files
    assert_verify_passes(EXAMPLE, lakehouse, conf)


@pytest.mark.crash
@pytest.mark.soak  # a second files crash: CI's is tests/connectors/files/test_crash (both readers)
@pytest.mark.timeout(1800)
def test_kill9_mid_stream_restart_then_verify_passes(spark, tmp_path: Path) -> None:
    landing, lakehouse = tmp_path / "landing", Lakehouse.at(tmp_path / "lakehouse")
    land_wave(landing, 1)
    conf = {"files.landing": str(landing), "files.maxFilesPerTrigger": "1"}
    args = ["run", str(EXAMPLE), "--lakehouse", str(lakehouse.root), "--master", "local[2]"]
    bronze = lakehouse.checkpoint_path("bronze_orders")
    report = run_cli_with_kills(
        tmp_path,
        [*args, *conf_args(conf)],
        kill_when=lambda _: spark_commits(bronze) >= 1,  # one file of four in
        min_delay=240,
        max_delay=300,
        final_timeout=900,
    )
    assert report.kills == 1
    table = read_table(lakehouse, "bronze_orders")
    assert table.num_rows == 200 and pc.count_distinct(table["order_id"]).as_py() == 200
    land_wave(landing, 2)
    assert_verify_passes(EXAMPLE, lakehouse, conf)
