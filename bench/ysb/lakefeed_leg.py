"""Run a lakefeed benchmark pipeline in-process and report its job time.

The session is built first (JVM start is not the pipeline's cost, and the plain PySpark and
Flink legs exclude theirs too); the timer then covers what ``lakefeed run --mode MODE`` does:
validation, starting the flows, every micro-batch, the Delta commits and the stop. In
``continuous`` mode the run lasts until SIGINT/SIGTERM (graceful stop), which is how the
latency benchmark drives it. The pipeline reads its inputs from environment variables set by
the calling script (``YSB_*``, ``NEXMARK_*``).

    python -m bench.ysb.lakefeed_leg --pipeline FILE --table NAME --work DIR
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench.ysb import protocol


def run(args: argparse.Namespace) -> tuple[float, float, float]:
    """Run the pipeline into ``work/lakehouse``; the job time in seconds, when it started
    (epoch) and the session's start time (on a cluster: executors registered and checked).
    Fails loudly."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.pipeline.loader import load_pipeline
    from lakefeed.runtime.runner import RunOptions, run_pipeline
    from lakefeed.session import spark_session
    from lakefeed.spark.cluster import parse_spark_conf

    conf = {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}
    if args.shuffle_partitions is not None:  # else lakefeed's default (the cluster's cores)
        conf["spark.sql.shuffle.partitions"] = str(args.shuffle_partitions)
    session_started = time.perf_counter()
    spark = spark_session(
        "bench-lakefeed",
        master=args.master or f"local[{args.cores}]",
        conf={**conf, **parse_spark_conf(args.spark_conf)},
    )
    session_s = time.perf_counter() - session_started
    loaded = load_pipeline([args.pipeline], spark=spark)
    options = RunOptions(mode=args.mode, trigger_interval=args.trigger_interval)
    if args.warmup:
        run_pipeline(loaded, Lakehouse.at(args.work / "warmup-lakehouse"), spark, options)
    started_at, started = time.time(), time.perf_counter()
    result = run_pipeline(loaded, Lakehouse.at(args.work / "lakehouse"), spark, options)
    elapsed = time.perf_counter() - started
    spark.stop()
    if not result.ok:
        raise SystemExit(f"lakefeed run failed: {result.failed} ({result.reason})")
    return elapsed, started_at, session_s


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    elapsed, started_at, session_s = run(args)
    lakehouse = args.work / "lakehouse"
    from lakefeed.runtime.event_log import read_events

    events = read_events(lakehouse / "event_log")
    progress = [e["details"] for e in events if e["event_type"] == "flow_progress" and e["details"]]
    protocol.emit(
        elapsed_s=elapsed,
        stream_s=protocol.stream_seconds(progress),
        first_batch_s=protocol.first_batch_after(progress, started_at),
        startup_s=_startup(events, started_at),
        output=str(lakehouse / "tables" / args.table),
        format="delta",
        durations_ms=protocol.sum_durations(progress),
        session_s=session_s,
    )
    from lakefeed.runtime.shutdown import exit_now

    exit_now(0)


def _startup(events: list[dict], started_at: float) -> dict[str, float]:
    """Seconds from the job's start to the first event of each kind before the first batch
    (``run_start``: validated; ``flow_start``: the query started)."""
    firsts: dict[str, float] = {}
    for event in events:
        kind = event["event_type"]
        if kind in ("run_start", "flow_start") and kind not in firsts:
            firsts[kind] = round(event["timestamp"].timestamp() - started_at, 3)
    return firsts


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipeline", type=Path, required=True)
    p.add_argument("--table", required=True, help="the gold table whose path is reported")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--mode", default="available-now")
    p.add_argument("--trigger-interval", default="5 seconds", help="continuous mode only")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument(
        "--shuffle-partitions",
        type=int,
        default=None,
        help="default: lakefeed's (4 on local[*], the executors' cores on a cluster)",
    )
    p.add_argument("--master", default=None, help="default: local[CORES]; e.g. spark://HOST:PORT")
    p.add_argument("--spark-conf", action="append", default=[], help="spark.key=value, repeatable")
    p.add_argument("--warmup", action="store_true", help="run the pipeline once before measuring")
    return p.parse_args(argv)


if __name__ == "__main__":
    main()
