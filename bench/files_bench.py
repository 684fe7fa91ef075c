"""cloudFiles benchmark: lakefeed's file source vs Spark's native JSON file stream source.

1. Throughput: the same JSON-lines files, the same explicit schema, the same parquet sink,
   ``trigger(availableNow=True)``; rows/s of each and the ratio (target >= 0.8x), both on wall
   time (query start to end: includes the Python process Spark starts per query for a Python
   streaming source) and on micro-batch processing time (the batches' ``triggerExecution``).
   A third leg is lakefeed's cloudFiles with ``lakefeed.reader=spark`` (planned in Python,
   parsed by Spark's JSON reader, no Python process per query).
   Legs alternate and repeat in one run because this machine kind is noisy.
2. Discovery cost: steady-state micro-batch time of a running stream that finds 10 new files
   when 100 vs 100,000 files were already ingested (``latestOffset`` and the whole trigger),
   plus the bare directory listing of those folders for reference.

    .venv/bin/python -m bench.files_bench [--files 20 --rows-per-file 20000 --repeats 2]
    .venv/bin/python -m bench.files_bench --smoke     # seconds; used by a test

A run with bench/results/files_source.json's arguments rewrites that file (the performance
page's row; see bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.results import Run, add_option, count

SCHEMA = "id BIGINT, device STRING, ts TIMESTAMP, temperature DOUBLE, ok BOOLEAN, note STRING"


def write_json_files(folder: Path, files: int, rows: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = []
        for i in range(rows):
            n = f * rows + i
            lines.append(
                json.dumps(
                    {
                        "id": n,
                        "device": f"dev-{rng.randrange(1000)}",
                        "ts": f"2026-01-01T00:{(n // 60) % 60:02d}:{n % 60:02d}Z",
                        "temperature": round(rng.uniform(-10, 40), 3),
                        "ok": rng.random() > 0.1,
                        "note": "x" * rng.randrange(0, 20),
                    }
                )
            )
        (folder / f"part-{f:05d}.json").write_text("\n".join(lines) + "\n")
    return files * rows


def _run(df, out: Path, attempts: int = 3) -> tuple[float, float]:
    """Wall seconds and summed batch-processing seconds to drain ``df`` into parquet; a leg whose
    Python worker did not start on a busy machine (a Spark socket timeout before any batch) is
    retried from scratch."""
    for attempt in range(attempts):
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        query = (
            df.writeStream.format("parquet")
            .option("path", str(out / "data"))
            .option("checkpointLocation", str(out / "cp"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination()
            wall = time.perf_counter() - start
            batches = sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress)
            return wall, batches / 1000
        except Exception as error:
            if "failed to connect back" not in str(error) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def throughput(spark, work: Path, files: int, rows: int, repeats: int) -> dict:
    land = work / "land"
    total = write_json_files(land, files, rows)

    def cloud_files(reader: str):  # noqa: ANN202
        return (
            spark.readStream.format("cloudFiles")
            .schema(SCHEMA)
            .option("cloudFiles.format", "json")
            .option("cloudFiles.schemaLocation", str(work / f"schema-{time.time_ns()}"))
            .option("cloudFiles.maxFilesPerTrigger", files)
            .option("lakefeed.reader", reader)
            .load(str(land))
        )

    legs = {
        "spark_json": lambda: (
            spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", files).json(str(land))
        ),
        "lakefeed_cloudFiles": lambda: cloud_files("python"),
        "lakefeed_cloudFiles_spark_reader": lambda: cloud_files("spark"),
    }
    # Warm-up: JVM JIT and Python workers, not counted.
    for name, make in legs.items():
        _run(make(), work / f"warm-{name}")
    wall: dict[str, list[float]] = {name: [] for name in legs}
    batch: dict[str, list[float]] = {name: [] for name in legs}
    for r in range(repeats):
        for name, make in legs.items():
            out = work / f"{name}-{r}"
            seconds, processing = _run(make(), out)
            wall[name].append(round(seconds, 2))
            batch[name].append(round(processing, 2))
            shutil.rmtree(out)
    result: dict = {"rows": total, "files": files}
    for label, runs in (("wall", wall), ("batch", batch)):
        rates = {name: total / statistics.median(s) for name, s in runs.items()}
        result[label] = {
            "seconds": runs,
            "rows_per_s": {k: round(v) for k, v in rates.items()},
            "ratio": round(rates["lakefeed_cloudFiles"] / rates["spark_json"], 3),
            "ratio_spark_reader": round(
                rates["lakefeed_cloudFiles_spark_reader"] / rates["spark_json"], 3
            ),
        }
    return result


def _tiny_files(folder: Path, count: int, prefix: str) -> None:
    for i in range(count):
        sub = folder / f"d{i % 100:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{prefix}-{i:06d}.json").write_text(f'{{"id": {i}}}\n')


def _listing_seconds(folder: Path) -> float:
    """A bare recursive ``os.scandir`` walk of ``folder``: the listing any discovery pays."""
    start = time.perf_counter()
    stack, files = [str(folder)], 0
    while stack:
        for entry in os.scandir(stack.pop()):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                files += 1
    return time.perf_counter() - start


def discovery(spark, work: Path, existing: int, rounds: int = 3) -> dict:
    """Median batch time of a live stream when each trigger finds 10 new files."""
    land = work / f"land-{existing}"
    _tiny_files(land, existing, "old")
    df = (
        spark.readStream.format("cloudFiles")
        .schema("id BIGINT")
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaLocation", str(work / f"schema-{existing}"))
        # The existing files count as already ingested: the stream's seen set holds them all.
        .option("cloudFiles.includeExistingFiles", "false")
        .load(str(land))
    )
    query = (
        df.writeStream.format("noop")
        .option("checkpointLocation", str(work / f"cp-{existing}"))
        .trigger(processingTime="1 second")
        .start()
    )
    batches: list[dict] = []
    try:
        _wait(lambda: query.lastProgress is not None)
        for r in range(rounds):
            _tiny_files(land / f"new-{r}", 10, f"new{r}")
            seen = len(batches)
            _wait(lambda s=seen: len(_with_rows(query)) > s)
            batches = _with_rows(query)
    finally:
        query.stop()
    trigger = [b["durationMs"]["triggerExecution"] for b in batches]
    latest = [b["durationMs"]["latestOffset"] for b in batches]
    return {
        "existing_files": existing,
        "batch_ms_median": statistics.median(trigger),
        "latest_offset_ms_median": statistics.median(latest),
        "listing_ms": round(_listing_seconds(land) * 1000, 1),
        "rows_per_batch": [b["numInputRows"] for b in batches],
    }


def _with_rows(query) -> list[dict]:
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def _wait(condition, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("stream did not make progress")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows-per-file", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--many", type=int, default=100_000, help="files already ingested")
    parser.add_argument("--few", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for a test")
    add_option(parser)
    args = parser.parse_args()
    run = Run.begin(parser, ["files_source"], sys.argv[1:])
    if args.smoke:
        args.files, args.rows_per_file, args.repeats, args.many, args.few = 2, 200, 1, 300, 10

    from lakefeed.session import spark_session

    # A busy shared machine can take longer than Spark's default 15 s to start a Python worker.
    conf = {"spark.ui.enabled": "false", "spark.python.authenticate.socketTimeout": "120s"}
    spark = spark_session("files-bench", master="local[2]", conf=conf)
    work = Path(tempfile.mkdtemp(prefix="files-bench-"))
    try:
        result = {
            "throughput": throughput(spark, work, args.files, args.rows_per_file, args.repeats),
            "discovery": [discovery(spark, work, n) for n in (args.few, args.many)],
        }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    few, many = result["discovery"]
    result["batch_time_ratio_many_vs_few"] = round(
        many["batch_ms_median"] / max(few["batch_ms_median"], 1), 2
    )
    print(json.dumps(result, indent=1))
    measured = result["throughput"]
    run.record(
        "files_source",
        benchmark="File ingestion (cloudFiles)",
        workload=f"{args.files} JSON files, {count(measured['rows'])} rows, wall time",
        baseline="Spark `readStream.json`",
        order=60,
        ratio=round(measured["wall"]["ratio"], 2),
        target=0.8,
    )


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
