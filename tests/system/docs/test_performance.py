"""The performance page leads with a table generated from the benchmarks' result files."""

from __future__ import annotations

import argparse
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--batches", type=int, default=5)
    results.add_option(parser)
    return parser


def _figures() -> dict[str, object]:
    return {k: v for k, v in BASE.items() if k in ("benchmark", "workload", "baseline", "order")}


def test_a_run_with_the_pages_arguments_replaces_its_file(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    stored = Result(
        **{**BASE, "command": "PYTHONPATH=. .venv/bin/python -m bench.x --rows 10"}, ratio=1.0
    )
    results.record(stored, "x", tmp_path)
    run = results.Run.begin(_parser(), ["x"], ["--batches", "5", "--rows=10"])  # same, parsed
    run.record("x", **_figures(), ratio=0.9, target=0.8)
    (written,) = results.load(tmp_path)
    assert (written.ratio, written.outcome, written.command) == (0.9, "met", stored.command)
    assert re.fullmatch(r"\d+ cores, \d+ GiB, load [\d.]+", written.machine)
    assert written.date != stored.date and written.commit


def test_a_run_at_another_size_writes_only_where_it_is_told(
    monkeypatch, tmp_path: Path, capsys
) -> None:
    monkeypatch.setattr(results, "RESULTS", tmp_path / "page")
    (tmp_path / "page").mkdir()
    stored = Result(**{**BASE, "command": ".venv/bin/python bench/x.py --rows 10"}, ratio=1.0)
    results.record(stored, "x", tmp_path / "page")
    results.Run.begin(_parser(), ["x"], ["--rows", "3"]).record("x", **_figures(), ratio=0.1)
    assert results.load(tmp_path / "page") == [stored]
    assert "not written" in capsys.readouterr().out
    elsewhere = ["--rows", "3", "--results", str(tmp_path / "smoke")]
    results.Run.begin(_parser(), ["x"], elsewhere).record("x", **_figures(), ratio=0.1)
    (smoke,) = results.load(tmp_path / "smoke")
    assert smoke.ratio == 0.1 and smoke.command.endswith("--rows 3 --results " + elsewhere[-1])


def test_sizes_as_the_page_writes_them() -> None:
    assert [results.count(n) for n in (4_000_000, 320_000, 2_500_000, 40)] == [
        "4M",
        "320k",
        "2.5M",
        "40",
    ]
