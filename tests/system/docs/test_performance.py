"""The performance page leads with a table generated from the benchmarks' result files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import results
from bench.results import Result

from .test_references import DOCS, hook  # noqa: F401 - the hook fixture

BASE = dict(
    benchmark="X",
    workload="w",
    baseline="b",
    date="2026-11-29 04:00",
    machine="2 cores, idle",
    command="python -m bench.x",
    order=1,
)


def test_the_table_is_the_result_files(hook) -> None:  # noqa: F811
    loaded = results.load()
    assert len(loaded) >= 10
    rows = hook.render_performance().splitlines()
    assert rows[:2] == list(results.HEADER)
    assert rows[2:] == [r.row() for r in loaded]
    assert all(r.command in hook.render_performance_commands() for r in loaded)


def test_the_page_leads_with_the_table() -> None:
    page = (DOCS / "performance.md").read_text()
    first_section = re.split(r"^## ", page, flags=re.M)[0]
    assert "<!-- performance-results -->" in first_section
    assert "| Benchmark |" not in page  # no table written by hand beside it


def test_a_verdict_is_computed_from_ratio_and_target() -> None:
    assert Result(**BASE, ratio=0.85, target=0.9).outcome == "missed"
    assert Result(**BASE, ratio=0.95, target=0.9).outcome == "met"
    assert Result(**BASE, ratio=1.2).outcome == "—"
    with pytest.raises(ValueError, match="computed"):
        Result(**BASE, ratio=0.5, target=0.9, verdict="met")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        Result(**{**BASE, "date": "yesterday"}, ratio=1.0)


def test_record_and_load_round_trip(tmp_path: Path) -> None:
    result = Result(**BASE, ratio=0.93, target=0.9, commit="abc1234")
    results.record(result, "x", tmp_path)
    assert results.load(tmp_path) == [result]
    assert "| **0.93x** | ≥ 0.9x | met | 2026-11-29 04:00 | abc1234 |" in result.row()
