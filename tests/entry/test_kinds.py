"""Dataset kinds and run modes are str-valued enums: typed for Python, the same strings for the
CLI and the event log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lakefeed as lf
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.kinds import DatasetKind, RunMode
from lakefeed.runtime.runner import MODES, RunOptions
from tests.pipeline.support import load, write

FLOWS = """
import lakefeed as lf

@lf.table
def raw():
    return lf.source("iot")

@lf.materialized_view
def summary():
    return lf.read("raw")

@lf.view
def recent():
    return lf.read("raw")
"""

SQL = "CREATE OR REFRESH STREAMING TABLE copied AS SELECT * FROM STREAM(raw);"


def test_every_dataset_gets_its_kind_as_an_enum(tmp_path: Path) -> None:
    folder = write(tmp_path / "p", {"flows.py": FLOWS, "more.sql": SQL})
    kinds = {name: d.kind for name, d in load([folder]).datasets.items()}
    assert kinds == {
        "raw": DatasetKind.STREAMING_TABLE,
        "summary": DatasetKind.MATERIALIZED_VIEW,
        "recent": DatasetKind.VIEW,
        "copied": DatasetKind.STREAMING_TABLE,
    }
    assert all(type(kind) is DatasetKind for kind in kinds.values())
    assert kinds["raw"] == "table" and json.dumps(kinds["summary"]) == '"materialized_view"'


def test_run_modes_are_the_cli_strings() -> None:
    assert [mode.value for mode in RunMode] == list(MODES)
    assert RunMode("available-now") is RunMode.AVAILABLE_NOW == "available-now"
    assert RunOptions(mode=RunMode.BACKFILL).mode == "backfill"
    with pytest.raises(PipelineError, match="use one of continuous, available-now"):
        RunOptions(mode="sometimes")
    assert lf.RunMode is RunMode and lf.DatasetKind is DatasetKind
