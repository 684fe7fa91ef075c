"""Nexmark q0, q1, q2, q5, q7 as lakefeed pipelines: events/s per core next to Flink's figures.

Writes the Nexmark event stream once as a bronze Delta table (:mod:`bench.nexmark.generate`),
then runs each query's pipeline (:mod:`bench.nexmark.pipeline`) in ``available-now`` mode in its
own process and reports input events / job time / cores. Flink's per-core throughput is quoted
from nexmark/nexmark's README ("Benchmark Results", Flink 1.13, 8 workers × 8 cores, 100 M
events, blackhole sink): a published figure on other hardware, not a same-run ratio.

    .venv/bin/python -m bench.nexmark.run --events 2000000 --chart docs/nexmark.png

A run with bench/results/nexmark.json's arguments rewrites that file (the performance page's
row: the range of the queries' ratios to Flink's figures; see bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.nexmark import generate as gen
from bench.results import Run, add_option, count
from bench.ysb.harness import (
    ROOT,
    LegRun,
    bar_chart,
    exit_on_sigterm,
    fresh_dir,
    load_average,
    machine,
    median,
    run_leg,
)

# nexmark/nexmark README.md, "Benchmark Results" table, column "Throughput/Cores"
# (file read at commit 0c6d9cf08c9c86485b062d6565cdc06024368558).
FLINK_PER_CORE = {"q0": 155_020, "q1": 157_940, "q2": 175_210, "q5": 22_140, "q7": 12_330}
GOLD = {q: f"nexmark_{q}" for q in FLINK_PER_CORE}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    run = Run.begin(parser, ["nexmark"], sys.argv[1:] if argv is None else argv)
    exit_on_sigterm()
    spec = gen.NexmarkSpec(args.events, rate=args.event_rate)
    bronze = _prepare(spec, args.out / "bronze", args.files)
    expected = gen.expected_rows(spec, args.files)
    queries = [q for q in args.queries.split(",") if q]
    print(f"Nexmark: {spec.events:,} events ({args.files} files), queries {queries}; machine "
          f"{machine()}; load {load_average():.1f}", flush=True)  # fmt: skip
    results: dict[str, Any] = {}
    if args.together:  # one run of every query: checks them all, measures none separately
        runs = [_run(args, bronze, queries, 0)]
        for query in queries:
            results[query] = _result(query, runs, spec.events, args.cores, expected.get(query))
            _print(query, results[query])
    for query in [] if args.together else queries:
        runs = [_run(args, bronze, [query], repeat) for repeat in range(args.repeats)]
        results[query] = _result(query, runs, spec.events, args.cores, expected.get(query))
        _print(query, results[query])
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "command": "python -m bench.nexmark.run " + " ".join(sys.argv[1:]),
        "events": spec.events,
        "cores": args.cores,
        "queries": results,
    }
    (args.out / "results.json").write_text(json.dumps(summary, indent=2))
    _print_summary(summary)
    if args.chart:
        _chart(summary, args.chart)
    _record(run, results, spec.events)
    return 0 if all(r["ok"] for r in results.values()) else 1


def _record(run: Run, results: dict[str, Any], events: int) -> None:
    """The page's row: the range of the queries' ratios to Flink's published figures."""
    ratios = [r["ratio_to_flink_per_core"] for r in results.values() if r["ok"]]
    if not ratios:
        print("result nexmark: not written: no query ran correctly")
        return
    run.record(
        "nexmark",
        benchmark=f"Nexmark {', '.join(results)}",
        workload=f"{count(events)} events",
        baseline="Flink's published per-core figures",
        order=130,
        shown=f"{min(ratios):.2f}–{max(ratios):.2f}x",
        target_text="orientation only",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--event-rate", type=int, default=50_000, help="events per second of event time")
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--max-files", type=int, default=4, help="maxFilesPerTrigger of the source")
    p.add_argument("--queries", default=",".join(FLINK_PER_CORE))
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "nexmark")
    p.add_argument("--chart", type=Path, default=None)
    p.add_argument("--together", action="store_true", help="all queries in one run (smoke test)")
    p.add_argument("--timeout", type=float, default=900)
    add_option(p)
    return p


def _prepare(spec: gen.NexmarkSpec, bronze: Path, files: int) -> Path:
    """Write the bronze table, or reuse it when the same spec was written before."""
    stamp = bronze.parent / "bronze-spec.json"
    wanted = json.dumps({"spec": spec.__dict__, "files": files})
    if not (stamp.exists() and stamp.read_text() == wanted and bronze.exists()):
        import shutil

        shutil.rmtree(bronze, ignore_errors=True)
        started = time.perf_counter()
        gen.write_bronze(spec, bronze, files)
        stamp.write_text(wanted)
        print(f"generated the bronze table in {time.perf_counter() - started:.1f} s", flush=True)
    return bronze


def _run(args: argparse.Namespace, bronze: Path, queries: list[str], repeat: int) -> LegRun:
    name = "-".join(queries)
    work = fresh_dir(args.out / "work" / f"{name}-{repeat}")
    argv = [sys.executable, "-m", "bench.ysb.lakefeed_leg", "--work", str(work),
            "--pipeline", str(ROOT / "bench" / "nexmark" / "pipeline.py"),
            "--table", GOLD[queries[0]], "--cores", str(args.cores)]  # fmt: skip
    env = {
        "NEXMARK_BRONZE": str(bronze),
        "NEXMARK_QUERY": ",".join(queries),
        "NEXMARK_MAX_FILES": str(args.max_files),
    }
    return run_leg(name, argv, args.out / "logs" / f"{name}-{repeat}.log", args.timeout, env)


def _result(
    query: str, runs: list[LegRun], events: int, cores: int, expected_rows: int | None
) -> dict[str, Any]:
    good = [r for r in runs if r.error is None]
    rates = [events / r.figures["elapsed_s"] for r in good]
    rows = [_rows(Path(r.figures["output"]).parent / GOLD[query]) for r in good]
    if expected_rows is None:
        correct = all(n > 0 for n in rows)  # windows: checked for output only
    else:
        correct = all(n == expected_rows for n in rows)
    per_core = median(rates) / cores
    return {
        "events_per_s": rates,
        "events_per_s_per_core": per_core,
        "flink_per_core_published": FLINK_PER_CORE[query],
        "ratio_to_flink_per_core": per_core / FLINK_PER_CORE[query],
        "rows": rows,
        "load_after_run": round(load_average(), 1),
        "expected_rows": expected_rows,
        "ok": bool(good) and correct,
        "failures": [r.error for r in runs if r.error],
    }


def _rows(table: Path) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(str(table)).to_pyarrow_dataset().count_rows())


def _print(query: str, r: dict[str, Any]) -> None:
    if r["failures"]:
        print(f"  {query}: FAILED {r['failures']}", flush=True)
        return
    print(f"  {query}: {r['events_per_s_per_core']:,.0f} events/s/core (Flink published "
          f"{r['flink_per_core_published']:,}), rows {r['rows']} expected "
          f"{r['expected_rows'] or '> 0'}", flush=True)  # fmt: skip


def _print_summary(summary: dict[str, Any]) -> None:
    from bench.ysb.doc import nexmark

    print("\n" + "\n".join(nexmark(summary)))


def _chart(summary: dict[str, Any], path: Path) -> None:
    queries = list(summary["queries"])
    bar_chart(
        path,
        f"Nexmark, lakefeed events/s per core ({summary['machine']})",
        queries,
        [summary["queries"][q]["events_per_s_per_core"] for q in queries],
        "events/s per core",
    )


if __name__ == "__main__":
    raise SystemExit(main())
