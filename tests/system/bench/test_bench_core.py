"""Spark-free checks of the benchmark building blocks (milliseconds)."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.json as pj
import pytest

from bench.latency.measure import batch_breakdown, committed_rows, row_latencies_ms, stats
from bench.nexmark import generate as nexmark
from bench.ysb import events as ev
from bench.ysb import protocol


def _gen(events: int = 3000, rate: int = 100) -> ev.Generator:
    return ev.Generator(ev.EventSpec(events, rate=rate), ev.Campaigns.generate(3))


def test_events_are_the_same_however_they_are_sliced() -> None:
    gen = _gen(200_000)
    whole = gen.columns(0, 200_000)
    part = gen.columns(65_000, 70_000)
    for name in ("ad", "event_type", "event_time"):
        assert np.array_equal(whole[name][65_000:135_000], part[name])


def test_json_files_hold_the_reference_counts(tmp_path: Path) -> None:
    """The files every engine reads count to exactly the reference (pyarrow as the engine)."""
    gen = _gen()
    paths = ev.write_json_files(gen, tmp_path, files=3)
    assert [p.name for p in paths] == sorted(p.name for p in paths)
    mtimes = [os.stat(p).st_mtime_ns for p in paths]
    assert mtimes == sorted(mtimes)
    table = pa.concat_tables(pj.read_json(p) for p in paths)
    assert table.num_rows == 3000
    assert set(table.column_names) == {
        "user_id", "page_id", "ad_id", "ad_type", "event_type", "event_time", "ip_address"
    }  # fmt: skip
    campaign = dict(zip(gen.campaigns.ads, gen.campaigns.campaign_of_ad, strict=True))
    counts: dict[tuple[str, int], int] = {}
    for row in table.to_pylist():
        if row["event_type"] == "view":
            key = (campaign[row["ad_id"]], int(row["event_time"]) // 10_000 * 10_000)
            counts[key] = counts.get(key, 0) + 1
    assert counts == gen.reference_counts(chunk=1000)
    assert sum(counts.values()) > 800  # about a third of the events are views


def test_compare_reports_missing_wrong_and_unexpected_windows() -> None:
    expected = {("a", 0): 5, ("a", 10_000): 7, ("a", 20_000): 1}
    assert ev.compare(expected, {("a", 0): 5, ("a", 10_000): 7}, closed_before_ms=20_000) == []
    problems = ev.compare(expected, {("a", 0): 4, ("b", 0): 1}, closed_before_ms=None)
    assert any("expected 5, got 4" in p for p in problems)
    assert any("missing window ('a', 10000)" in p for p in problems)
    assert any("unexpected window ('b', 0)" in p for p in problems)


def test_counts_from_table_accepts_timestamps_and_millis() -> None:
    ts = pa.array([10_000_000], pa.timestamp("us", tz="UTC"))
    as_ts = pa.table({"campaign_id": ["c"], "window_start": ts, "count": [3]})
    as_ms = pa.table({"campaign_id": ["c"], "window_start": [10_000], "count": [3]})
    assert ev.counts_from_table(as_ts) == ev.counts_from_table(as_ms) == {("c", 10_000): 3}


def test_protocol_round_trip_and_missing_result() -> None:
    line = protocol.PREFIX + json.dumps({"elapsed_s": 1.5})
    assert protocol.parse(f"noise\n{line}\nmore noise") == {"elapsed_s": 1.5}
    with pytest.raises(RuntimeError, match="no result line"):
        protocol.parse("Traceback: boom")


def test_latency_is_read_from_the_delta_log(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    now_ms = time.time() * 1000
    created = np.array([now_ms - 900, now_ms - 400], dtype=np.int64)
    table = pa.table({"event_time": pa.array(created * 1000, pa.timestamp("us", tz="UTC"))})
    write_deltalake(str(tmp_path), table)
    assert committed_rows(tmp_path) == 2
    got_created, latency = row_latencies_ms(tmp_path)
    assert sorted(got_created.tolist()) == sorted(created.astype(float).tolist())
    assert all(300 <= v < 60_000 for v in latency)
    s = stats(got_created, latency, since_ms=0)
    assert s.rows == 2 and s.p50_ms <= s.p99_ms <= s.max_ms


def test_growing_latency_means_falling_behind() -> None:
    created = np.arange(1000, dtype=float) * 10
    steady = stats(created, np.full(1000, 200.0), since_ms=0)
    growing = stats(created, np.linspace(200, 20_000, 1000), since_ms=0)
    assert not steady.falling_behind
    assert growing.falling_behind
    assert stats(created, np.full(1000, 200.0), since_ms=10**9).rows == 0


def test_batch_breakdown_averages_the_measured_batches() -> None:
    def progress(second: int, rows: int, add_batch: int) -> dict:
        stamp = f"2026-11-25T10:00:{second:02d}.000Z"
        timing = {"triggerExecution": add_batch + 50, "addBatch": add_batch, "walCommit": 20}
        return {"timestamp": stamp, "numInputRows": rows, "durationMs": timing}

    since = datetime(2026, 11, 25, 10, 0, 5, tzinfo=UTC).timestamp() * 1000
    warm, empty = progress(1, 10, 900), progress(7, 0, 5)
    b = batch_breakdown([warm, progress(6, 10, 300), empty, progress(8, 5, 500)], since)
    assert b["batches"] == 2  # the warm-up batch and the empty one are not counted
    assert (b["addBatch"], b["triggerExecution"], b["walCommit"]) == (400, 450, 20)
    assert b["commitOffsets"] == 0


def test_nexmark_proportions_and_expected_rows() -> None:
    spec = nexmark.NexmarkSpec(5000)
    batch = nexmark.batch(spec, 0, 5000)
    kinds = np.bincount(batch.column("event_type").to_numpy(), minlength=3)
    assert kinds.tolist() == [100, 300, 4600]  # 2% person, 6% auction, 92% bid
    bid_null = batch.column("bid_price").null_count
    assert bid_null == 400
    expected = nexmark.expected_rows(spec, files=2)
    assert expected["q0"] == expected["q1"] == 4600
    assert 0 < expected["q2"] < 4600 // 50


def test_stream_time_and_phase_profile_from_progress() -> None:
    progress = [
        {"timestamp": "2026-11-22T01:00:00.000Z", "durationMs": {"triggerExecution": 1500}},
        {"timestamp": "2026-11-22T01:00:02.000Z", "durationMs": {"triggerExecution": 500}},
    ]
    assert protocol.stream_seconds(progress) == pytest.approx(2.5)
    assert protocol.stream_seconds([]) is None
    assert protocol.sum_durations(progress) == {"triggerExecution": 2000}


def test_ysb_summary_ratios_and_markdown() -> None:
    from bench.ysb import doc, run

    legs = {
        "lakefeed": {"median_events_per_s": 90.0, "median_stream_events_per_s": 120.0},
        "pyspark": {"median_events_per_s": 100.0, "median_stream_events_per_s": 150.0},
        "flink": {"median_events_per_s": float("nan")},
    }
    assert run._ratios(legs) == {
        "lakefeed/pyspark": pytest.approx(0.9),
        "lakefeed/pyspark, streaming time only": pytest.approx(0.8),
    }
    summary = {
        "date": "d", "machine": "m", "command": "c", "events": 10, "files": 1, "repeats": 1,
        "ratios": {"lakefeed/pyspark": 0.9},
        "legs": {
            "pyspark": {
                "events_per_s": [100.0], "median_events_per_s": 100.0, "correct": True,
                "failures": [], "median_stream_events_per_s": 150.0,
            },
            "flink": {
                "events_per_s": [], "median_events_per_s": float("nan"), "correct": False,
                "failures": ["exit code 1"],
            },
        },
    }  # fmt: skip
    text = "\n".join(doc.ysb(summary))
    assert "| pyspark | 100 | 100 | 150 | = reference |" in text
    assert "failed: exit code 1" in text and "**lakefeed/pyspark: 0.90x**" in text


def _leg(rate: float, correct: bool = True) -> dict[str, object]:
    return {"median_events_per_s": rate, "correct": correct, "failures": []}


def test_ysb_writes_its_page_rows_through_bench_results(monkeypatch, tmp_path: Path) -> None:
    """A run writes the rows it has the legs for (warm or cold as it ran), through
    bench.results.Run: the stored command's arguments replace a file; other arguments write
    only with --results; a leg whose counts were wrong gives no row."""
    from bench import results
    from bench.ysb import record, run

    stored, chosen = tmp_path / "stored", tmp_path / "chosen"
    stored.mkdir()
    monkeypatch.setattr(results, "RESULTS", stored)
    command = "PYTHONPATH=. .venv/bin/python -m bench.ysb.run --events 6000 --legs lakefeed,pyspark"
    old = results.Result("YSB, cold", "w", "b", "2026-11-26 13:47", "m", command, 80, ratio=1.0)
    results.record(old, "ysb_cold", stored)
    summary = {"legs": {"lakefeed": _leg(90.0), "pyspark": _leg(100.0), "arrow": _leg(900.0)}}

    parser = run._parser()
    cold = ["--legs", "lakefeed,pyspark", "--events", "6000"]
    args = parser.parse_args(cold)
    record.Recorder.begin(parser, cold).write(summary, args)
    (replaced,) = results.load(stored)
    assert (replaced.ratio, replaced.target, replaced.command) == (0.9, 0.95, command)
    assert replaced.workload == "6k events, 40 files, cold"

    warm = ["--events", "6000", "--max-files", "2", "--warmup", "--results", str(chosen)]
    record.Recorder.begin(parser, warm).write(summary, parser.parse_args(warm))
    written = {p.stem: json.loads(p.read_text()) for p in chosen.glob("*.json")}
    assert sorted(written) == ["ysb_limit_warm", "ysb_warm"]
    assert (
        written["ysb_warm"]["workload"] == "6k events, 40 files, 2 files per batch, after a warm-up"
    )
    assert written["ysb_limit_warm"]["shown"] == "0.10x (PySpark 0.11x)"

    summary["legs"]["arrow"] = _leg(900.0, correct=False)
    shutil.rmtree(chosen)
    record.Recorder.begin(parser, warm).write(summary, parser.parse_args(warm))
    assert sorted(p.stem for p in chosen.glob("*.json")) == ["ysb_warm"]


def test_many_flows_generates_fifty_tables_that_load(tmp_path: Path) -> None:
    from bench.many_flows import generate
    from lakefeed import load_pipeline

    pipeline = load_pipeline([generate(tmp_path / "many", 10)])
    kinds = [d.kind for d in pipeline.datasets.values()]
    assert len(kinds) == 50 and kinds.count("table") == 30
    assert kinds.count("materialized_view") == 20


def test_process_tree_usage_is_read_from_proc() -> None:
    from bench.procs import tree_usage

    usage = tree_usage()
    assert usage.driver.processes == 1 and usage.driver.rss_bytes > 0
    assert usage.driver.threads >= 1 and usage.driver.open_files >= 3
    assert usage.cpu_seconds > 0


def test_profile_charges_cpu_to_each_kind_of_process() -> None:
    """A child whose command line names pyspark counts as a Python worker, this process as the
    driver; only this process tree is counted."""
    import subprocess
    import sys

    from bench.latency.profile import cpu_by_kind

    spin = "t = time.process_time()\nwhile time.process_time() - t < 0.1: pass\nprint(1)"
    child = subprocess.Popen(
        [sys.executable, "-u", "-c", f"import sys, time  # pyspark\n{spin}\nsys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stdout.readline()
    totals = cpu_by_kind()
    child.communicate()
    assert totals["driver"] > 0
    assert totals["py_workers"] >= 0.05
