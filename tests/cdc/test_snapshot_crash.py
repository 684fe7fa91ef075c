"""kill -9 of ``lakefeed run`` while AUTO CDC FROM SNAPSHOT flows apply numbered snapshots,
restart: the SCD1 target is the newest snapshot and the SCD2 target the history the snapshots
make, each snapshot applied once (the target's and the state table's MERGEs carry the flow's
txn with the snapshot's version; a kill between them replays the snapshot into the same rows)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from lakefeed.cdc.snapshot import snapshot_app_id
from lakefeed.core.lakehouse import Lakehouse
from tests.cdc import model
from tests.support.crash import kill_soon_after_progress, run_cli_with_kills

PIPELINE = Path(__file__).parent / "pipelines_snapshot_crash.py"
SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.string())])


def _applied(lakehouse: Lakehouse) -> int:
    """Snapshots the targets' commits hold so far (both flows together)."""
    total = 0
    for table in ("customers", "customers_history"):
        try:
            txn = DeltaTable(str(lakehouse.table_path(table))).transaction_version(
                snapshot_app_id(f"{table}_snapshot_cdc")
            )
        except Exception:  # not created yet, or caught mid-commit: no progress to report
            return total
        total += txn or 0
    return total


@pytest.mark.crash
@pytest.mark.soak  # a second crash point: CI proves CDC under kill -9 in tests/cdc/test_crash
@pytest.mark.timeout(900)
def test_kill9_while_applying_snapshots_applies_each_once(tmp_path: Path) -> None:
    snapshots = model.snapshots(seed=5, count=4, keys=12)
    folder = tmp_path / "snapshots"
    folder.mkdir()
    for version, rows in enumerate(snapshots, 1):
        table = pa.Table.from_pylist([rows[k] for k in sorted(rows)], schema=SCHEMA)
        pq.write_table(table, folder / f"{version}.parquet")
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    args = ["run", str(PIPELINE), "--lakehouse", str(lakehouse.root), "--master", "local[2]"]
    args += ["--mode", "available-now", "--conf", f"snapshots.folder={folder}"]
    soon = kill_soon_after_progress(lambda: _applied(lakehouse), seed=3, within=1.5)
    applied_at_kill: list[int] = []

    def kill_when(index: int) -> bool:
        fired = soon(index)
        if fired:
            applied_at_kill.append(_applied(lakehouse))
        return fired

    report = run_cli_with_kills(tmp_path, args, kill_when=kill_when, continuous=False)
    assert report.kills == 1
    assert 0 < applied_at_kill[0] < 2 * len(snapshots), applied_at_kill  # killed mid-way
    newest = snapshots[-1]
    assert model.rows(lakehouse, "customers", ["id"]) == [newest[k] for k in sorted(newest)]
    history = model.rows(lakehouse, "customers_history", ["id", "__START_AT"])
    assert history == model.snapshot_history(snapshots)
