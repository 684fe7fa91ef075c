"""Smoke runs of the comparison scripts on tiny input: they run end to end and check results.

Not measurements (those are ``bench/``'s job, after other load has stopped). Each script runs
in a subprocess, as a user would run it; Spark and the broker live in those subprocesses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.ysb.harness import FLINK_VENV, ROOT, leg_env

# Tiny inputs: about 20-40 s each on an idle 2-core machine, much longer on a busy one. They
# reproduce the benchmarks, not a kind CI must prove: soak runs (``./dev test --all``).
pytestmark = [pytest.mark.spark, pytest.mark.soak, pytest.mark.timeout(1200)]


def _script(module: str, *args: str, timeout: float = 1100) -> str:
    """Run a script; on timeout SIGTERM it, so it stops its broker and legs before failing."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=leg_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=120)
        pytest.fail(f"{module} timed out after {timeout:.0f} s:\n{out[-3000:]}{err[-3000:]}")
    assert proc.returncode == 0, out[-4000:] + err[-4000:]
    return out


def test_delta_bench_prints_ratios_and_ceilings() -> None:
    tiny = ["--rows", "40000", "--files", "4", "--max-files-per-trigger", "2", "--repeats", "1"]
    out = _script("bench.delta_bench", *tiny)
    assert "rows=40,000" in out  # the script itself asserts every row reached the Delta table
    lines = ("sink ratio", "source ratio", "batch read", "batch write", "sink   ceiling")
    for line in (*lines, "src    ceiling"):
        assert line in out, out


def test_merge_bench_prints_legs_ratio_and_breakdown() -> None:
    out = _script("bench.merge_bench", "--quick")
    # The script itself asserts the lakefeed and delta-rs MERGE results are equal.
    assert "rows=200,000" in out, out
    for line in ("delta-rs merge, direct", "foreachBatch MERGE", "streaming append"):
        assert line in out, out
    assert "upsert ratio lakefeed/delta-rs" in out, out
    for phase in ("Spark -> Arrow hand-off", "delta-rs scan", "Spark: offset + commit logs"):
        assert phase in out, out


def test_ysb_lakefeed_and_pyspark_agree(tmp_path: Path) -> None:
    """The Kafka leg shares its source with the latency script, whose smoke run covers it."""
    tiny = ["--events", "6000", "--event-rate", "200", "--files", "2", "--repeats", "1", "--warmup"]
    chart, rows = tmp_path / "ysb.png", tmp_path / "rows"
    legs = "lakefeed,pyspark,arrow"  # arrow: the physical limit, pyarrow on all cores
    out = ["--out", str(tmp_path), "--chart", str(chart), "--results", str(rows)]
    _script("bench.ysb.run", *tiny, "--legs", legs, *out)
    summary = json.loads((tmp_path / "results.json").read_text())
    # the performance page's rows of a warm run, through bench.results (here into --results)
    assert sorted(p.name for p in rows.iterdir()) == ["ysb_limit_warm.json", "ysb_warm.json"]
    warm = json.loads((rows / "ysb_warm.json").read_text())
    assert warm["ratio"] == round(summary["ratios"]["lakefeed/pyspark"], 2)
    for leg in legs.split(","):
        assert summary["legs"][leg]["correct"], summary["legs"][leg]
        assert summary["legs"][leg]["median_events_per_s"] > 0
    assert summary["ratios"]["lakefeed/pyspark"] > 0
    assert summary["ratios"]["lakefeed/arrow"] > 0
    assert summary["legs"]["lakefeed"]["first_batch_s"][0] > 0
    assert chart.stat().st_size > 1000


@pytest.mark.skipif(
    not (FLINK_VENV / "bin" / "python").exists(),
    reason="PyFlink lives in bench/.venv-flink, created by the first `python -m bench.ysb.run` "
    "(a large download); the smoke run does not create it",
)
def test_ysb_pyflink_leg_agrees(tmp_path: Path) -> None:
    tiny = ["--events", "6000", "--event-rate", "200", "--files", "2", "--repeats", "1", "--warmup"]
    _script("bench.ysb.run", *tiny, "--legs", "flink", "--out", str(tmp_path))
    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["legs"]["flink"]["correct"], summary["legs"]["flink"]


@pytest.mark.kafka
def test_latency_script_measures_rows_in_gold(tmp_path: Path) -> None:
    args = ["--rates", "300", "--duration", "3", "--triggers", "shortest", "--warmup", "0"]
    _script("bench.latency.run", *args, "--out", str(tmp_path))
    (run,) = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert run["drained"] and run["rows_in_gold"] >= run["expected_views"] > 0
    assert 0 < run["p50_ms"] <= run["p99_ms"] < 300_000
    assert run["batch_ms"]["batches"] >= 1 and run["batch_ms"]["addBatch"] > 0


def test_nexmark_queries_produce_their_rows(tmp_path: Path) -> None:
    tiny = ["--events", "30000", "--event-rate", "1000", "--files", "3", "--together"]
    tiny += ["--queries", "q2,q5,q7"]  # q0 and q1 differ from q2 by a projection only
    _script("bench.nexmark.run", *tiny, "--out", str(tmp_path))
    queries = json.loads((tmp_path / "results.json").read_text())["queries"]
    assert set(queries) == {"q2", "q5", "q7"}
    for name, result in queries.items():
        assert result["ok"], (name, result)


def test_big_state_accounts_for_every_id_and_restarts(tmp_path: Path) -> None:
    results = tmp_path / "big_state.json"
    out = _script("bench.big_state", "--quick", "--json", str(results))
    assert "restart: first batch done" in out and "last/first quarter" in out, out
    assert "dedup legs against dropDuplicatesWithinWatermark" in out, out
    summary = json.loads(results.read_text())
    for name in ("dedup:within-watermark", "dedup:ttl", "sessions"):
        work = summary[name]
        assert work["verdicts"]["state_rows_as_expected"], work["verdicts"]
        assert work["verdicts"]["table_rows_as_expected"], work["verdicts"]
        # lakefeed.state.memory reached Spark's RocksDB settings
        assert work["rocksdb_conf"] == {"boundedMemoryUsage": "true", "maxMemoryUsageMB": "256"}
        assert work["restart_batch"]["state_rows"] > 0
