"""Checkpoints out of step with what their flows wrote.

A checkpoint behind its table: put back from an older backup, or its last batch deleted "to
retry it". The batch Spark plans again carries the number of a batch the table already holds
(its ``txn``), over other source offsets: the run must refuse before writing
(``CHECKPOINT_BEHIND_TABLE``), not skip the batch whole and report "0 rows written" while the
new files never reach the table. A sink flow's checkpoint lost beside the Delta sink it
filled: refused like a table's (``CHECKPOINT_MISSING``), not every row sent again."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from deltalake import DeltaTable

import lakefeed as lf
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.results import RunResult
from tests.pipeline.support import table, write

PIPELINE = """
import lakefeed as lf

@lf.table
def bronze():
    return lf.read_files(lf.config("t.landing"), "json", schema="id BIGINT").drop("_metadata")

lf.create_sink("export", "delta", {"path": lf.config("t.export")})

@lf.append_flow(target="export")
def to_export():
    return lf.read_stream("bronze")
"""


class Landing:
    """A pipeline over a landing folder: ``land`` numbered one-row files, ``run`` once."""

    def __init__(self, spark, root: Path) -> None:  # noqa: ANN001
        self.spark = spark
        self.root = root
        self.flows = write(root / "flows", {"pipeline.py": PIPELINE}) / "pipeline.py"
        self.lakehouse = Lakehouse.at(root / "lh")
        self.checkpoint = self.lakehouse.checkpoint_path("bronze")
        self.export = root / "export"

    def land(self, *numbers: int) -> None:
        write(self.root / "landing", {f"{n:02d}.json": f'{{"id": {n}}}\n' for n in numbers})

    def run(self, **options: object) -> RunResult:
        conf = {"t.landing": str(self.root / "landing"), "t.export": str(self.export)}
        return lf.run(
            self.flows,
            lakehouse=self.lakehouse,
            mode="available-now",
            conf=conf,
            spark=self.spark,
            **options,  # type: ignore[arg-type]
        )

    def ids(self) -> list[int]:
        return sorted(table(self.lakehouse, "bronze")["id"].to_pylist())

    def refused(self) -> list[dict]:
        """Run once more, which must fail: the failures' details (code, error) in the event
        log."""
        with pytest.raises(PipelineError):
            self.run()
        failures = read_events(self.lakehouse.event_log_path, event_types=["flow_failed"])
        return [event["details"] for event in failures]


def test_a_checkpoint_restored_from_an_older_backup_is_refused(spark, tmp_path: Path) -> None:
    pipe = Landing(spark, tmp_path)
    pipe.land(1, 2, 3)
    assert pipe.run().ok
    shutil.copytree(pipe.checkpoint, tmp_path / "backup")
    pipe.land(4, 5)
    assert pipe.run().ok
    shutil.rmtree(pipe.checkpoint)
    shutil.copytree(tmp_path / "backup", pipe.checkpoint)
    pipe.land(6, 7)
    (failure,) = pipe.refused()  # permanent: not retried
    assert failure["code"] == "CHECKPOINT_BEHIND_TABLE"
    assert "TO VERSION AS OF 1" in failure["error"]  # version 1 holds batch 0, as the backup
    assert pipe.ids() == [1, 2, 3, 4, 5]  # nothing written by the refused run


def test_a_checkpoint_whose_last_batch_was_deleted_is_refused(spark, tmp_path: Path) -> None:
    pipe = Landing(spark, tmp_path)
    pipe.land(1, 2, 3)
    assert pipe.run().ok
    pipe.land(4, 5)
    assert pipe.run().ok
    last = max(int(p.name) for p in (pipe.checkpoint / "commits").iterdir() if p.name.isdigit())
    for folder in ("offsets", "commits"):
        (pipe.checkpoint / folder / str(last)).unlink()
    pipe.land(6, 7)
    # Spark's own check may fail the first attempt (the deleted files' .crc are left), the
    # restart is refused for good.
    assert pipe.refused()[-1]["code"] == "CHECKPOINT_BEHIND_TABLE"
    assert pipe.ids() == [1, 2, 3, 4, 5]


def test_a_sink_flow_whose_checkpoint_is_lost_is_refused(spark, tmp_path: Path) -> None:
    pipe = Landing(spark, tmp_path)
    pipe.land(1, 2, 3)
    assert pipe.run().ok
    shutil.rmtree(pipe.lakehouse.checkpoint_path("to_export"))
    pipe.land(4)
    with pytest.raises(PipelineError) as refused:
        pipe.run()
    assert "[LAKEFEED:CHECKPOINT_MISSING]" in refused.value.problems[0]
    assert "sink 'export'" in refused.value.problems[0]
    assert sorted(DeltaTable(str(pipe.export)).to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]
    # Resetting the sink's flows on purpose is not a lost checkpoint.
    assert pipe.run(full_refresh=["export"]).ok
