"""End-to-end latency of a lakefeed pipeline at fixed input rates from a Kafka topic.

For each trigger (lakefeed's default ``processingTime`` interval and the shortest, ``0
seconds`` = back-to-back micro-batches) and each rate: start the pipeline
(``bench/latency/pipeline.py``, continuous mode) in its own process, warm it up until its first
commit, produce YSB events at the rate for ``--duration`` seconds stamped with their creation
time, wait until every view event is in the gold Delta table, stop the pipeline gracefully, and
read the latencies from the table's log (:mod:`bench.latency.measure`). A rate is sustained when
every event arrived and the latency did not grow during the run.

    .venv/bin/python -m bench.latency.run --rates 1000,10000,50000 --chart docs/latency.png

A run with bench/results/latency.json's arguments rewrites that file (the performance page's
row: p99 at 10k events/s with the shortest trigger; see bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.latency.measure import PHASES, batch_breakdown, committed_rows, row_latencies_ms, stats
from bench.results import Run, add_option
from bench.ysb import broker
from bench.ysb import events as ev
from bench.ysb.harness import (
    ROOT,
    exit_on_sigterm,
    fresh_dir,
    kill_group,
    leg_env,
    load_average,
    machine,
)

TRIGGERS = {"default": "5 seconds", "shortest": "0 seconds"}
TABLE = "ysb_views"
VIEW = '"event_type": "view"'


PAGE_RUN = ("shortest", 10_000)  # the performance page's row: this trigger at this rate
TARGET_P99_MS = 1500


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    run = Run.begin(parser, ["latency"], sys.argv[1:] if argv is None else argv)
    exit_on_sigterm()
    out: Path = args.out
    campaigns = ev.Campaigns.generate(7)
    campaigns_file = out / "campaigns.json"
    campaigns.write_json(campaigns_file)
    templates = _templates(campaigns)
    rates = [int(r) for r in args.rates.split(",")]
    print(
        f"latency: rates {rates}, {args.duration:.0f} s each; machine {machine()}; "
        f"load {load_average():.1f}",
        flush=True,
    )
    results: list[dict[str, Any]] = []
    with broker.tansu(out / "logs" / "tansu.log") as bootstrap:
        for trigger in args.triggers.split(","):
            for rate in rates:
                for repeat in range(1, args.repeats + 1):
                    result = _one(args, bootstrap, campaigns_file, templates, trigger, rate, repeat)
                    results.append(result)
                    _print(result)
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "command": "python -m bench.latency.run " + " ".join(sys.argv[1:]),
        "duration_s": args.duration,
        "runs": results,
        "max_sustained": {
            t: max([r["rate"] for r in results if r["trigger"] == t and r["sustained"]], default=0)
            for t in args.triggers.split(",")
        },
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    _print_summary(summary)
    if args.chart:
        _chart(summary, args.chart)
    _record(run, results)
    return 0


def _record(run: Run, results: list[dict[str, Any]]) -> None:
    """The page's row: the worst p99 of the runs at ``PAGE_RUN``'s trigger and rate."""
    trigger, rate = PAGE_RUN
    runs = [r for r in results if (r["trigger"], r["rate"]) == PAGE_RUN]
    if not runs:
        print(
            f"result latency: not written: no run at {rate:,} events/s with the {trigger} trigger"
        )
        return
    p99 = max(r["p99_ms"] for r in runs)
    kept = p99 <= TARGET_P99_MS and all(r["sustained"] for r in runs)
    run.record(
        "latency",
        benchmark="Latency, Kafka → gold",
        workload=f"{rate // 1000}k events/s, {trigger} trigger",
        baseline="—",
        order=120,
        shown=f"p99 **{p99 / 1000:.2f} s**",
        target_text=f"p99 ≤ {TARGET_P99_MS / 1000:g} s",
        verdict="met" if kept else "missed",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", default="1000,10000,50000", help="events/s, comma separated")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of input per rate")
    p.add_argument("--triggers", default="default,shortest", help=f"comma list of {list(TRIGGERS)}")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--repeats", type=int, default=1, help="runs per trigger and rate")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds of each run not measured")
    p.add_argument("--drain-timeout", type=float, default=60.0)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "latency")
    p.add_argument("--chart", type=Path, default=None)
    p.add_argument(
        "--spark-conf", action="append", default=[], help="spark.key=value for the pipeline"
    )
    add_option(p)
    return p


def _templates(campaigns: ev.Campaigns) -> list[tuple[str, str, bool]]:
    """(before, after, is_view) around the event time of 10k pre-drawn YSB events."""
    gen = ev.Generator(ev.EventSpec(10_000), campaigns)
    marker = '"event_time": "'
    templates = []
    for line in gen.json_lines(0, 10_000).to_pylist():
        before, rest = line.split(marker)
        templates.append((before + marker, rest[rest.index('"') :], VIEW in line))
    return templates


def _one(
    args: argparse.Namespace,
    bootstrap: str,
    campaigns_file: Path,
    templates: list[tuple[str, str, bool]],
    trigger: str,
    rate: int,
    repeat: int,
) -> dict[str, Any]:
    name = f"{trigger}-{rate}-{repeat}"
    topic, work = f"lat-{name}", fresh_dir(args.out / "work" / name)
    broker.create_topic(bootstrap, topic, args.partitions)
    table = work / "lakehouse" / "tables" / TABLE
    leg = _start_pipeline(args, bootstrap, topic, campaigns_file, work, TRIGGERS[trigger], name)
    producer: Any = broker.producer(bootstrap, **{"linger.ms": 2})
    try:
        views = _warm_up(producer, topic, templates, table, leg)
        measured_from_ms = time.time() * 1000 + args.warmup * 1000
        sent_views, produce_s = _produce_at(producer, topic, templates, rate, args.duration)
        views += sent_views
        drained = _wait_rows(table, views, args.drain_timeout)
    finally:
        _stop(leg)
    created, latency = row_latencies_ms(table)
    s = stats(created, latency, measured_from_ms)
    return {
        "trigger": trigger,
        "repeat": repeat,
        "trigger_interval": TRIGGERS[trigger],
        "rate": rate,
        "achieved_rate": int(rate * args.duration / produce_s),
        "expected_views": views,
        "rows_in_gold": int(created.size),
        "drained": drained,
        "sustained": drained and not s.falling_behind,
        "load": load_average(),
        "batch_ms": batch_breakdown(_progresses(work), measured_from_ms),
        **asdict(s),
    }


def _progresses(work: Path) -> list[dict[str, Any]]:
    """The gold flow's query progresses, from the pipeline's event log."""
    from lakefeed.runtime.event_log import read_events

    events = read_events(work / "lakehouse" / "event_log", event_types=["flow_progress"])
    return [e["details"] for e in events]


def _start_pipeline(
    args: argparse.Namespace,
    bootstrap: str,
    topic: str,
    campaigns_file: Path,
    work: Path,
    interval: str,
    name: str,
) -> subprocess.Popen[bytes]:
    log = args.out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable, "-m", "bench.ysb.lakefeed_leg", "--work", str(work),
        "--pipeline", str(ROOT / "bench" / "latency" / "pipeline.py"), "--table", TABLE,
        "--mode", "continuous", "--trigger-interval", interval, "--cores", str(args.cores),
        *(f"--spark-conf={c}" for c in args.spark_conf),
    ]  # fmt: skip
    env = leg_env(
        {"YSB_CAMPAIGNS": str(campaigns_file), "YSB_BOOTSTRAP": bootstrap, "YSB_TOPIC": topic}
    )
    with log.open("wb") as out:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip


def _send(producer: Any, topic: str, template: tuple[str, str, bool], now_ms: int) -> None:
    before, after, _ = template
    while True:
        try:
            producer.produce(topic, f"{before}{now_ms}{after}".encode())
            return
        except BufferError:
            producer.poll(0.01)


def _warm_up(
    producer: Any,
    topic: str,
    templates: list[tuple[str, str, bool]],
    table: Path,
    leg: subprocess.Popen[bytes],
    timeout: float = 300.0,
) -> int:
    """Trickle events until the gold table has rows: the pipeline is up and running."""
    deadline, views, i = time.monotonic() + timeout, 0, 0
    while not (table / "_delta_log").is_dir() or committed_rows(table) == 0:
        if leg.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"pipeline not running (exit code {leg.returncode})")
        for _ in range(10):
            template = templates[i % len(templates)]
            _send(producer, topic, template, int(time.time() * 1000))
            views += template[2]
            i += 1
        producer.poll(0)
        time.sleep(0.1)
    producer.flush(10)
    return views


def _produce_at(
    producer: Any, topic: str, templates: list[tuple[str, str, bool]], rate: int, duration: float
) -> tuple[int, float]:
    """Send ``rate`` events per second for ``duration`` s, each stamped when it is sent.

    Returns the views sent and the seconds it took (longer than ``duration``: the producer
    could not keep the rate, and the achieved rate is what the result reports).
    """
    start, sent, views = time.monotonic(), 0, 0
    total = int(rate * duration)
    while sent < total:
        due = min(total, int((time.monotonic() - start) * rate) + 1)
        now_ms = int(time.time() * 1000)
        while sent < due:
            template = templates[sent % len(templates)]
            _send(producer, topic, template, now_ms)
            views += template[2]
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    elapsed = time.monotonic() - start
    producer.flush(30)
    return views, elapsed


def _wait_rows(table: Path, expected: int, timeout: float) -> bool:
    """True once the gold table holds ``expected`` rows (from the log's add stats)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if committed_rows(table) >= expected:
            return True
        time.sleep(0.5)
    return False


def _stop(leg: subprocess.Popen[bytes]) -> None:
    """Graceful stop (SIGTERM: finish the batch), then kill the process group if it hangs."""
    if leg.poll() is None:
        os.kill(leg.pid, signal.SIGTERM)
        try:
            leg.wait(timeout=120)
        except subprocess.TimeoutExpired:
            kill_group(leg)


def _print(r: dict[str, Any]) -> None:
    print(f"  {r['trigger']:9} {r['rate']:>7,}/s (sent {r['achieved_rate']:,}/s)  p50 "
          f"{r['p50_ms']:7.0f} ms  p95 "
          f"{r['p95_ms']:7.0f} ms  p99 {r['p99_ms']:7.0f} ms  rows {r['rows_in_gold']:,}/"
          f"{r['expected_views']:,}  {'sustained' if r['sustained'] else 'FELL BEHIND'}  "
          f"(load {r['load']:.1f})", flush=True)  # fmt: skip
    b = r["batch_ms"]
    phases = "  ".join(f"{phase} {b[phase]:.0f}" for phase in PHASES)
    print(f"      {b['batches']:.0f} batches, mean ms: batch {b['triggerExecution']:.0f} = "
          f"{phases}", flush=True)  # fmt: skip


def _print_summary(summary: dict[str, Any]) -> None:
    print("\n| trigger | rate (events/s) | run | p50 ms | p95 ms | p99 ms | batch ms | sustained |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in summary["runs"]:
        print(
            f"| {r['trigger']} (`{r['trigger_interval']}`) | {r['rate']:,} | {r['repeat']} "
            f"| {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {r['p99_ms']:.0f} "
            f"| {r['batch_ms']['triggerExecution']:.0f} | {'yes' if r['sustained'] else 'no'} |"
        )
    for trigger, rate in summary["max_sustained"].items():
        print(f"highest rate sustained, {trigger} trigger: {rate:,} events/s")


def _chart(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    for trigger in dict.fromkeys(r["trigger"] for r in summary["runs"]):
        runs = [r for r in summary["runs"] if r["trigger"] == trigger]
        ax.plot([r["rate"] for r in runs], [r["p99_ms"] / 1000 for r in runs], "o-",
                label=f"p99, {trigger} trigger")  # fmt: skip
        ax.plot([r["rate"] for r in runs], [r["p50_ms"] / 1000 for r in runs], "x--",
                label=f"p50, {trigger} trigger")  # fmt: skip
    ax.axhline(1.5, color="grey", lw=0.8, ls=":", label="target p99 1.5 s")
    ax.set_xscale("log")
    ax.set_xlabel("input rate (events/s)")
    ax.set_ylabel("event → visible in gold (s)")
    ax.set_title(f"lakefeed end-to-end latency, Kafka → Delta, {summary['machine']}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
