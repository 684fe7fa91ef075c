"""Exactly-once upserts under kill -9: a foreachBatch MERGE stream killed and restarted."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.crash import ahead_of_spark, read_runs, run_delta_driver_with_kills

COMMITS = 16
ROWS = 100
STEP = 40  # commits overlap: most keys are updated by several batches

# A second Delta crash (MERGE through foreachBatch): CI proves MERGE with a txn under kill -9 in
# tests/cdc/test_crash, the Delta stream in tests/connectors/delta/test_crash.
pytestmark = [pytest.mark.crash, pytest.mark.soak, pytest.mark.timeout(1800)]


def _source(root: Path) -> dict[int, tuple[str, int]]:
    """Write the source commits; return the expected target: id -> (last value, times seen)."""
    seen: Counter[int] = Counter()
    last: dict[int, str] = {}
    for c in range(COMMITS):
        ids = list(range(c * STEP, c * STEP + ROWS))
        values = [f"c{c}-{i}" for i in ids]
        write_deltalake(
            str(root), pa.table({"id": pa.array(ids, pa.int64()), "v": values}), mode="append"
        )
        seen.update(ids)
        last.update(zip(ids, values, strict=True))
    return {i: (last[i], seen[i]) for i in last}


def test_foreach_batch_merge_survives_sigkill_exactly_once(tmp_path: Path, artifacts: Path) -> None:
    expected = _source(tmp_path / "src")
    # Run 1 is spared: the driver kills itself right after its first MERGE commit.
    driver = Path(__file__).with_name("merge_crash_driver.py")
    report = run_delta_driver_with_kills(driver, tmp_path, kills=4, seed=5)
    assert report.kills == 3 and report.runs == 5
    runs = read_runs(tmp_path, artifacts / "merge_crash_runs.json")
    ahead = ahead_of_spark(runs)
    assert ahead, f"no restart found the MERGE commit ahead of Spark's commit log: {runs}"

    rows = DeltaTable(str(tmp_path / "dst")).to_pyarrow_table().to_pylist()
    assert len(rows) == len(expected)
    assert {r["id"]: (r["v"], r["n"]) for r in rows} == expected
