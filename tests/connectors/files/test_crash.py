"""Exactly-once under kill -9: cloudFiles -> Delta killed mid-ingest, restarted, files landing."""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from tests.connectors.files.crash_driver import FILES_PER_RUN, ROWS_PER_FILE
from tests.support.crash import kill_soon_after_progress, run_driver_with_kills
from tests.support.delta import commit_count

pytestmark = pytest.mark.crash


@pytest.mark.parametrize(("reader", "within"), [("python", 1.0), ("spark", 0.5)])
def test_each_file_exactly_once_across_kills(tmp_path: Path, reader: str, within: float) -> None:
    # Spark's reader finishes a run's few batches sooner: kill sooner after a commit.
    commits = functools.partial(commit_count, tmp_path / "dst")
    kill_when = kill_soon_after_progress(commits, seed=5, within=within)

    report = run_driver_with_kills(
        Path(__file__).with_name("crash_driver.py"),
        tmp_path,
        reader,
        workdir=tmp_path,
        kills=3,
        kill_when=kill_when,
        min_delay=120,
        max_delay=120,
        final_timeout=400,
    )
    # A run whose batches all end before its kill moment exits 0 by itself; it still landed its
    # files, so the exactly-once checks below hold the same; at least one run must be killed.
    assert report.kills >= 1 and report.kills + report.finished_early == 3, report
    landed = sorted(p for p in (tmp_path / "land").rglob("*.json"))
    assert len(landed) == 4 * FILES_PER_RUN  # 3 killed runs + the final one each landed files
    table = DeltaTable(str(tmp_path / "dst")).to_pyarrow_table()
    assert table.num_rows == len(landed) * ROWS_PER_FILE
    keys = pc.binary_join_element_wise(table["path"], pc.cast(table["line"], "string"), ":")
    assert pc.count_distinct(keys).as_py() == table.num_rows  # no row twice
    assert set(table["path"].to_pylist()) == {str(p) for p in landed}  # no file missing
