"""YSB as a hand-written PySpark Structured Streaming job with Spark's native source and sink.

What a competent user writes without lakefeed: ``readStream.json`` over the landing folder,
the shared query, ``writeStream.parquet`` with ``trigger(availableNow=True)``. Spark's native
Kafka source needs the spark-sql-kafka jar, which cannot be fetched here (no Maven), so this job
has a files leg only.

Run: ``python -m bench.ysb.pyspark_job --input DIR --campaigns FILE --work DIR``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from bench.ysb import protocol, query


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{args.cores}]")
        .appName("ysb-pyspark")
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    if args.warmup:
        _run(spark, args, "warmup-")
    started = time.time()
    elapsed, build, stream = _run(spark, args, "")
    progress = [json.loads(p.json) for p in stream.recentProgress]
    spark.stop()
    protocol.emit(
        elapsed_s=elapsed,
        build_s=build,
        stream_s=protocol.stream_seconds(progress),
        first_batch_s=protocol.first_batch_after(progress, started),
        output=str(args.work / "output"),
        format="parquet",
        durations_ms=protocol.sum_durations(progress),
    )


def _run(spark: Any, args: argparse.Namespace, prefix: str) -> tuple[float, float, Any]:
    """One run of the job into ``work/{prefix}output``: its job time, the part of it spent
    building the query (before ``start()``) and its query.

    The time includes building the query, as lakefeed's includes evaluating its flow: on a cold
    JVM the first schema parse and analysis cost seconds, whichever code makes them."""
    started = time.perf_counter()
    events = (
        spark.readStream.schema(query.EVENT_SCHEMA)
        .option("maxFilesPerTrigger", args.max_files)
        .json(str(args.input))
    )
    counts = query.window_counts(events, query.campaigns_frame(spark, str(args.campaigns)))
    build = time.perf_counter() - started
    stream = (
        counts.writeStream.format("parquet")
        .outputMode("append")
        .option("checkpointLocation", str(args.work / f"{prefix}checkpoint"))
        .trigger(availableNow=True)
        .start(str(args.work / f"{prefix}output"))
    )
    stream.awaitTermination()
    return time.perf_counter() - started, build, stream


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = protocol.job_arguments(__doc__.splitlines()[0])
    p.add_argument("--shuffle-partitions", type=int, default=4)
    p.add_argument("--max-files", type=int, default=8)
    return p.parse_args(argv)


if __name__ == "__main__":
    main()
