"""``verify`` refuses when its catch-up run does not complete. A sink is not compared (it cannot
be recomputed), so a catch-up stopped early (its lease taken over, a signal) used to pass
``verify`` with the sink's rows missing: the fault soak counted such a trial "lost" with a
verify that said nothing (docs/faults.md, the one-process sequence of seeds 1-3)."""

from __future__ import annotations

from pathlib import Path

import pytest

import lakefeed as lf
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import set_config
from lakefeed.runtime import verify
from lakefeed.runtime.errors import VerifyCatchUpError
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from lakefeed.runtime.validate import Validation

PIPELINE = """
import lakefeed as lf

lf.create_sink("export", "delta", {"path": lf.config("sink.path")})


@lf.append_flow(target="export")
def to_export():
    return lf.source("iot", totalRows="20", rowsPerSecond="2", startTime="2026-01-01T00:00:00Z",
                     maxRowsPerTrigger="5")
"""
LOST = "the lease on lakehouse … was taken over by another run"


class LeaseTakenOver(PipelineRunner):
    """A runner whose lease is taken over as its flows start (the heartbeat's ``on_lost``)."""

    def _run_mode(self, validation: Validation) -> None:
        self.lease_taken_over(LOST)
        super()._run_mode(validation)


def test_a_catch_up_stopped_early_is_refused(spark, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    conf = {"sink.path": str(tmp_path / "export")}
    monkeypatch.setattr(verify, "PipelineRunner", LeaseTakenOver)
    with pytest.raises(VerifyCatchUpError, match="taken over by another run"):
        lf.verify(tmp_path / "pipeline.py", lakehouse=tmp_path / "lh", conf=conf, spark=spark)


def test_a_run_whose_lease_was_taken_over_is_not_ok(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """The run stops after its last committed batch and says why: ``lakefeed run`` exits 1
    instead of 0 (it did not finish what it was started for; the other run goes on)."""
    set_config({"sink.path": str(tmp_path / "export")})  # only its own, as `lakefeed run`
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    pipeline = lf.load_pipeline(tmp_path / "pipeline.py", spark=spark)
    options = RunOptions(mode="available-now")
    result = LeaseTakenOver(pipeline, Lakehouse(tmp_path / "lh"), spark, options).run()
    assert result.lease_lost and not result.ok
    assert result.reason == LOST
