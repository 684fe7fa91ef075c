"""Run a lakefeed benchmark pipeline once in ``available-now`` mode and report its job time.

The session is built first (JVM start is not the pipeline's cost, and the plain PySpark and
Flink legs exclude theirs too); the timer then covers what ``lakefeed run --mode available-now``
does: validation, starting the flow, every micro-batch, the Delta commits and the stop.

    python -m bench.ysb.lakefeed_leg --campaigns F --work DIR --input DIR      (files)
    python -m bench.ysb.lakefeed_leg --campaigns F --work DIR --bootstrap H:P --topic T
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench.ysb import protocol
from bench.ysb.harness import ROOT

PIPELINE = ROOT / "bench" / "ysb" / "pipeline.py"
TABLE = "ysb_window_counts"


def run_available_now(pipeline: Path, work: Path, cores: int, shuffle_partitions: int) -> float:
    """Run ``pipeline`` into ``work/lakehouse``; the job time in seconds. Fails loudly."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from lakefeed.lakehouse import Lakehouse
    from lakefeed.pipeline.loader import load_pipeline
    from lakefeed.runtime.runner import RunOptions, run_pipeline
    from lakefeed.session import spark_session

    spark = spark_session(
        "bench-lakefeed",
        master=f"local[{cores}]",
        conf={
            "spark.ui.enabled": "false",
            "spark.driver.memory": "2g",
            "spark.sql.shuffle.partitions": str(shuffle_partitions),
        },
    )
    loaded = load_pipeline([pipeline])
    started = time.perf_counter()
    result = run_pipeline(
        loaded, Lakehouse.at(work / "lakehouse"), spark, RunOptions(mode="available-now")
    )
    elapsed = time.perf_counter() - started
    spark.stop()
    if not result.ok:
        raise SystemExit(f"lakefeed run failed: {result.failed} ({result.reason})")
    return elapsed


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    os.environ["YSB_CAMPAIGNS"] = str(args.campaigns)
    if args.bootstrap:
        os.environ.update(YSB_BOOTSTRAP=args.bootstrap, YSB_TOPIC=args.topic)
        os.environ["YSB_MAX_OFFSETS"] = str(args.max_offsets)
    else:
        os.environ.update(YSB_INPUT=str(args.input), YSB_MAX_FILES=str(args.max_files))
    elapsed = run_available_now(PIPELINE, args.work, args.cores, args.shuffle_partitions)
    output = args.work / "lakehouse" / "tables" / TABLE
    protocol.emit(elapsed_s=elapsed, output=str(output), format="delta")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--campaigns", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--input", type=Path)
    p.add_argument("--max-files", type=int, default=8)
    p.add_argument("--bootstrap")
    p.add_argument("--topic", default="ad-events")
    p.add_argument("--max-offsets", type=int, default=1_000_000)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--shuffle-partitions", type=int, default=4)
    args = p.parse_args(argv)
    if (args.input is None) == (args.bootstrap is None):
        p.error("give exactly one of --input (files) or --bootstrap (Kafka)")
    return args


if __name__ == "__main__":
    main()
