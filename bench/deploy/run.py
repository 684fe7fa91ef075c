"""Deployment benchmark (issue 16 item 5): the same work on ``local[2]`` and on a Spark
standalone cluster of 2 workers x 1 core on the same machine, and lakefeed's Delta sink to local
disk and to an S3-API server (moto on 127.0.0.1).

    .venv/bin/python -m bench.deploy.run --events 5000000 --rows 4000000 --repeats 3

The script starts the cluster (a master and two 1-core workers from pyspark's own jars,
``tests/support/cluster.py``) and moto (``tests/support/s3.py``), and stops both at the end.
Each leg is its own process, as the benches it reuses run them:

- ``ysb``: the YSB lakefeed pipeline (``bench.ysb.run --legs lakefeed``, window counts checked
  against the reference) with ``--master local[2]`` and ``--master spark://…``;
- ``delta``: ``bench/delta_bench.py``'s sink legs (Spark's parquet sink, lakefeed's Delta sink)
  on ``local[2]`` and on the cluster;
- ``s3``: the same sink legs on ``local[2]``, tables and checkpoints on local disk vs on
  ``s3://`` (moto).

Runs alternate which side goes first. Printed: each leg's median rows/s and time, the ratios
and the verdicts (cluster >= 0.85x local[2], i.e. at most 15% slower; S3 >= 0.7x disk), and
where the difference goes: Spark's task metrics from its event log (scheduler delay, task
deserialization, result serialization, shuffle fetch wait) and session start (executor JVMs
and their Python workers, lakefeed's executor check); moto's requests per object kind
(Delta log, Spark checkpoint, data files, staging) and a round trip's latency; Spark's
per-phase batch times (``walCommit`` + ``commitOffsets`` = checkpoint writes, ``addBatch`` =
the sink's files and its Delta commit).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.deploy import figures
from bench.ysb.harness import ROOT, LegRun, exit_on_sigterm, fresh_dir, load_average, run_leg
from bench.ysb.harness import machine as machine_text
from tests.support.cluster import Cluster
from tests.support.s3 import MotoServer

PARTS = ("ysb", "delta", "s3")
SINK_LEGS = {"delta": "pq-sink,delta-sink", "s3": "pq-sink,delta-sink,delta-py-sink"}
"""delta_bench's legs per part; on S3 also the Python writer (the S3 default where Spark's
writer cannot write in place, e.g. under Spark Connect)."""


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    exit_on_sigterm()
    os.environ["PYTHONPATH"] = str(ROOT)  # the workers' Python workers import bench.ysb too
    parts = [p for p in args.parts.split(",") if p]
    out: Path = args.out
    print(f"deploy bench: {parts}; machine {machine_text()}; load {load_average():.1f}", flush=True)
    results: dict[str, list[LegRun]] = {}
    with (
        _cluster(out, "ysb" in parts or "delta" in parts) as master,
        _moto(out, "s3" in parts) as s3,
    ):
        for repeat in range(args.repeats):
            for part in parts:
                sides = _sides(part, master, s3)
                for side in sides if repeat % 2 == 0 else sides[::-1]:
                    name = f"{part}-{side[0]}"
                    run = _leg(part, side, args, out, repeat)
                    _print_run(name, repeat, run)
                    results.setdefault(name, []).append(run)
        summary = _summary(results, parts, args, out, s3)
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=str))
    return 0 if all(not s["failures"] for s in summary["legs"].values()) else 1


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=5_000_000, help="YSB events")
    p.add_argument("--rows", type=int, default=4_000_000, help="Delta bench rows")
    p.add_argument("--files", type=int, default=40, help="input files of both benches")
    p.add_argument("--max-files", type=int, default=10, help="maxFilesPerTrigger (both benches)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {PARTS}")
    p.add_argument("--no-warmup", dest="warmup", action="store_false", help="YSB: cold runs")
    p.add_argument("--quick", action="store_true", help="tiny inputs, one repeat (a smoke run)")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "deploy")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        help="key=value for every leg's session (e.g. an S3A setting to try against moto)",
    )
    args = p.parse_args(argv)
    unknown = set(args.parts.split(",")) - set(PARTS)
    if unknown:
        p.error(f"unknown parts {sorted(unknown)}; choose from {PARTS}")
    if args.quick:
        args.events, args.rows, args.files, args.max_files, args.repeats = 20000, 40000, 4, 2, 1
    return args


@contextlib.contextmanager
def _cluster(out: Path, wanted: bool) -> Iterator[str | None]:
    """A master and two 1-core workers on 127.0.0.1 while the cluster legs need them."""
    if not wanted:
        yield None
        return
    started = time.perf_counter()
    cluster = Cluster(fresh_dir(out / "cluster")).start(workers=2)
    try:
        print(
            f"cluster {cluster.url} (2 workers x 1 core) in {time.perf_counter() - started:.1f} s"
        )
        yield cluster.url
    finally:
        cluster.stop()


@contextlib.contextmanager
def _moto(out: Path, wanted: bool) -> Iterator[MotoServer | None]:
    if not wanted:
        yield None
        return
    (out / "logs").mkdir(parents=True, exist_ok=True)
    server = MotoServer(out / "logs" / "moto.log").start()
    try:
        yield server
    finally:
        server.stop()


Side = tuple[str, str | None, MotoServer | None]
"""A leg's label, its Spark master (None: local[2]) and the S3 server its sink writes to."""


def _sides(part: str, master: str | None, s3: MotoServer | None) -> list[Side]:
    if part == "s3":
        return [("disk", None, None), ("s3", None, s3)]
    return [("local", None, None), ("cluster", master, None)]


def _leg(part: str, side: Side, args: argparse.Namespace, out: Path, repeat: int) -> LegRun:
    label, master, s3 = side
    name = f"{part}-{label}"
    events = fresh_dir(out / "events" / f"{name}-{repeat}")
    events.mkdir(parents=True)
    spark_conf = [
        "spark.eventLog.enabled=true",
        f"spark.eventLog.dir={events.as_uri()}",
        "spark.eventLog.compress=false",
        *args.spark_conf,
    ]
    if part == "ysb":
        return _ysb(name, master, spark_conf, args, out, repeat)
    argv = [sys.executable, "-m", "bench.delta_bench", "--legs", SINK_LEGS[part]]
    argv += ["--rows", str(args.rows), "--files", str(args.files), "--repeats", "1"]
    argv += ["--max-files-per-trigger", str(args.max_files), "--master", master or "local[2]"]
    for item in spark_conf:
        argv += ["--spark-conf", item]
    env: dict[str, str] = {}
    if s3 is not None:
        argv += ["--sink-root", f"s3://{s3.bucket('deploy')}/run-{repeat}"]
        env = s3.env()
    log = out / "logs" / f"{name}-{repeat}.log"
    return run_leg(name, argv, log, args.timeout, env)


def _ysb(
    name: str,
    master: str | None,
    spark_conf: list[str],
    args: argparse.Namespace,
    out: Path,
    repeat: int,
) -> LegRun:
    """One lakefeed YSB run through ``bench.ysb.run`` (it checks the window counts)."""
    from bench.ysb import run as ysb

    work = out / "ysb" / f"{name}-{repeat}"
    argv = ["--events", str(args.events), "--files", str(args.files), "--legs", "lakefeed"]
    argv += ["--max-files", str(args.max_files), "--repeats", "1", "--timeout", str(args.timeout)]
    argv += ["--out", str(work), "--inputs", str(out / "ysb-input")]
    argv += ["--warmup"] * args.warmup + (["--master", master] if master else [])
    for item in spark_conf:
        argv += ["--spark-conf", item]
    started = time.perf_counter()
    ysb.main(argv)
    wall = time.perf_counter() - started
    summary = json.loads((work / "results.json").read_text())["legs"]["lakefeed"]
    if summary["failures"] or not summary["correct"]:
        return LegRun(name, error=f"{summary['failures'] or 'wrong window counts'}", wall_s=wall)
    rate = summary["median_events_per_s"]
    figures_ = {
        "rows": args.events,
        "session_s": summary["session_s"][0],
        "first_batch_s": summary["first_batch_s"][0],
        "legs": {"ysb": {"rows_per_s": rate, "runs_s": [args.events / rate]}},
        "durations_ms": {"ysb": summary["durations_ms"][0]},
    }
    return LegRun(name, figures_, wall_s=wall)


def _print_run(name: str, repeat: int, run: LegRun) -> None:
    if run.error:
        print(f"  #{repeat} {name:<14} FAILED: {run.error}", flush=True)
        return
    legs = run.figures["legs"]
    rates = "  ".join(f"{leg} {v['rows_per_s']:>11,.0f} rows/s" for leg, v in legs.items())
    print(f"  #{repeat} {name:<14} {rates}  wall {run.wall_s:6.1f} s", flush=True)


def _summary(
    results: dict[str, list[LegRun]],
    parts: list[str],
    args: argparse.Namespace,
    out: Path,
    s3: MotoServer | None,
) -> dict[str, Any]:
    """Print the rates, verdicts and overheads; return them for ``results.json``."""
    print(f"\n== results ({args.repeats} repeat(s), load {load_average():.1f}) ==")
    legs: dict[str, Any] = {}
    for name, runs in results.items():
        good = [r for r in runs if r.error is None]
        per_leg: dict[str, list[float]] = {}
        seconds: dict[str, list[float]] = {}
        for run in good:
            for leg, value in run.figures["legs"].items():
                per_leg.setdefault(leg, []).append(value["rows_per_s"])
                seconds.setdefault(leg, []).append(min(value["runs_s"]))
        for leg, rates in per_leg.items():
            print(figures.rate_line(f"{name} {leg}", rates, seconds[leg]))
        legs[name] = {
            "rows_per_s": per_leg,
            "session_s": [r.figures.get("session_s") for r in good],
            "durations_ms": [r.figures.get("durations_ms") for r in good],
            "query_ids": [r.figures.get("query_ids") or {} for r in good],
            "failures": [r.error for r in runs if r.error],
        }
    verdicts = _verdicts(legs, parts)
    print("\n== verdicts ==", *verdicts, sep="\n")
    _overheads(legs, parts, out, args, s3)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine_text(),
        "command": "python -m bench.deploy.run " + " ".join(sys.argv[1:]),
        "legs": legs,
        "verdicts": verdicts,
    }


PAIRS = {
    "ysb": ("local", "cluster", "ysb", figures.CLUSTER),
    "delta": ("local", "cluster", "delta-sink", figures.CLUSTER),
    "s3": ("disk", "s3", "delta-sink", figures.S3),
}


def _rates(legs: dict[str, Any], part: str, leg: str) -> list[list[float]]:
    """The rows/s of ``leg`` on both sides of ``part`` (base first)."""
    base, other = PAIRS[part][:2]
    return [
        legs.get(f"{part}-{side}", {}).get("rows_per_s", {}).get(leg, []) for side in (base, other)
    ]


def _verdicts(legs: dict[str, Any], parts: list[str]) -> list[str]:
    """The target of each part; for the sink parts also Spark's own parquet sink's ratio."""
    lines = []
    for part in parts:
        leg, target = PAIRS[part][2:]
        lines.append(f"  {part:<6} {leg:<11} " + figures.verdict(target, *_rates(legs, part, leg)))
        for other in SINK_LEGS.get(part, "").split(","):
            if other and other != leg:
                value = figures.ratio(*_rates(legs, part, other))
                lines.append(f"  {part:<6} {other:<13} {value:.2f}x (no target)")
    return lines


def _overheads(
    legs: dict[str, Any],
    parts: list[str],
    out: Path,
    args: argparse.Namespace,
    s3: MotoServer | None,
) -> None:
    print("\n== where the time goes ==")
    for name, leg in legs.items():
        starts = [s for s in leg["session_s"] if s is not None]
        if starts:
            print(
                f"  {name:<16} session start (JVMs, executors, Python workers' check) "
                f"{statistics.median(starts):5.1f} s"
            )
    _python_workers(out / "cluster")
    print("Spark task metrics (event log of the first run, warm-up included):")
    for name in legs:
        print(figures.read_task_times(out / "events" / f"{name}-0").line(name))
    _measured_task_times(legs, out)
    print("Spark batch phases (ms, summed over the batches of the first run):")
    for name, leg in legs.items():
        first = next(iter(d for d in leg["durations_ms"] if d), {})
        for query, phases in first.items():
            top = sorted(phases.items(), key=lambda kv: -kv[1])[:6]
            print(f"  {name:<16} {query:<14} " + ", ".join(f"{k} {v:,}" for k, v in top))
    if s3 is not None and "s3" in parts:
        _s3_overhead(s3, args)


def _measured_task_times(legs: dict[str, Any], out: Path) -> None:
    """Task metrics of each measured query of the first run: without the warm-up run (a new
    executor JVM loads classes and fetches jars in its first tasks) and the executor check."""
    print("Spark task metrics per measured query (first run; warm-up and executor check left out):")
    for name, leg in legs.items():
        ids = next(iter(leg.get("query_ids") or []), {})
        labels = {query: f"{name} {key}" for key, query in ids.items() if not key.endswith("-99")}
        if not labels:
            continue
        lines = figures.event_log_lines(out / "events" / f"{name}-0")
        for label, times in figures.query_task_times(lines, labels).items():
            print(times.line(label))


def _python_workers(cluster: Path) -> None:
    """Python worker start-up on the cluster's executors, per application (in run order)."""
    for app in sorted(cluster.glob("worker*/work/app-*"), key=lambda p: p.name):
        logs = [log.read_text(errors="replace").splitlines() for log in app.glob("*/stderr")]
        tasks, boot, init = figures.python_worker_times(line for log in logs for line in log)
        print(
            f"  {app.parent.parent.name} {app.name}: {tasks} Python task(s) on its executor, "
            f"worker start {boot:,} ms, init {init:,} ms"
        )


def _s3_overhead(s3: MotoServer, args: argparse.Namespace) -> None:
    requests = figures.s3_requests(s3.log.read_text(errors="replace").splitlines())
    batches = -(-args.files // args.max_files)
    print(f"S3 requests per measured run (moto's access log; {batches} micro-batches a run):")
    for fmt in ("parquet", "delta", "delta-py"):
        print(*requests.lines(fmt, batches), sep="\n")
    print("S3 round trip on this server (median of 20, ms): " + _latency(s3))


def _latency(s3: MotoServer) -> str:
    """Median time of one small PUT, HEAD, GET and LIST against the server."""
    import pyarrow.fs as pafs

    fs = pafs.S3FileSystem(
        endpoint_override=s3.endpoint.removeprefix("http://"),
        scheme="http",
        access_key=s3.env()["AWS_ACCESS_KEY_ID"],
        secret_key=s3.env()["AWS_SECRET_ACCESS_KEY"],
        region="us-east-1",
    )
    bucket = s3.bucket("latency")
    probe = f"{bucket}/probe"
    calls = {
        "PUT": lambda key: fs.open_output_stream(key).close(),
        "HEAD": lambda key: fs.get_file_info(key),
        "GET": lambda key: fs.open_input_stream(key).read(),
        "LIST": lambda _key: fs.get_file_info(pafs.FileSelector(probe)),
    }
    timings: dict[str, list[float]] = {op: [] for op in calls}
    for i in range(20):
        for op, call in calls.items():
            started = time.perf_counter()
            call(f"{probe}/{i:03d}.json")
            timings[op].append((time.perf_counter() - started) * 1000)
    return ", ".join(f"{op} {statistics.median(ms):.1f}" for op, ms in timings.items())


if __name__ == "__main__":
    raise SystemExit(main())
