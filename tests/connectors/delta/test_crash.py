"""Exactly-once under kill -9: a Delta->Delta stream killed repeatedly, restarted each time."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.crash import ahead_of_spark, read_runs, run_delta_driver_with_kills
from tests.support.delta import unreferenced_files

COMMITS = 20
ROWS = 200

# Six driver starts: about 2 minutes on an idle 2-core machine, far more on a contended one.
pytestmark = [pytest.mark.crash, pytest.mark.timeout(1800)]


def test_stream_survives_sigkill_exactly_once(tmp_path: Path, artifacts: Path) -> None:
    for c in range(COMMITS):
        ids = range(c * ROWS, (c + 1) * ROWS)
        write_deltalake(
            str(tmp_path / "src"),
            pa.table({"id": pa.array(ids, pa.int64()), "payload": [f"row-{i}" for i in ids]}),
            mode="append",
        )
    # Run 1 is spared: the sink's test hook kills it right after a Delta commit.
    driver = Path(__file__).with_name("crash_driver.py")
    report = run_delta_driver_with_kills(driver, tmp_path, kills=5, seed=11)
    # 4 kills by the harness + 1 by the sink's hook right after a Delta commit.
    assert report.kills == 4 and report.runs == 6
    runs = read_runs(tmp_path, artifacts / "delta_crash_runs.json")
    ahead = ahead_of_spark(runs)
    assert ahead, f"no restart found the Delta commit ahead of Spark's commit log: {runs}"

    table = DeltaTable(str(tmp_path / "dst")).to_pyarrow_table()
    ids = table.column("id").to_pylist()
    assert len(ids) == COMMITS * ROWS
    assert sorted(ids) == list(range(COMMITS * ROWS))
    # No file left behind by a killed attempt: the folder holds exactly what the table uses.
    dst = tmp_path / "dst"
    assert unreferenced_files(dst) == set()
