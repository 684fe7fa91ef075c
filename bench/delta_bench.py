"""Delta connector benchmark: lakefeed's Delta sink/source vs Spark's native parquet ones.

One process, one SparkSession, the same generated rows for every leg:
  sink:   readStream.parquet(input) -> writeStream.parquet   vs  -> writeStream.format("delta")
  source: readStream.parquet(<the Delta table's own files>) -> noop
          vs readStream.format("delta")(<that table>) -> noop
Every leg is a streaming query with trigger(availableNow=True) and the same maxFilesPerTrigger.
Prints rows/s per leg (best of --repeats) and the ratios (targets: sink >= 0.9x, source >= 0.8x).

    .venv/bin/python bench/delta_bench.py --rows 4000000 --files 40 --repeats 3
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def generate(folder: Path, rows: int, files: int) -> pa.Schema:
    """IoT-like rows: ids, a device string, a timestamp, two doubles, a status string."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(7)
    per_file = rows // files
    schema = None
    for index in range(files):
        start = index * per_file
        ids = np.arange(start, start + per_file, dtype=np.int64)
        table = pa.table(
            {
                "id": ids,
                "device": pa.array([f"dev-{i % 1000:04d}" for i in ids]),
                "ts": pa.array((1_700_000_000_000_000 + ids * 1000).astype("datetime64[us]")).cast(
                    pa.timestamp("us", "UTC")
                ),
                "temperature": rng.normal(20, 5, per_file),
                "humidity": rng.uniform(0, 100, per_file),
                "status": pa.array(np.where(ids % 97 == 0, "alert", "ok")),
            }
        )
        pq.write_table(table, folder / f"part-{index:05d}.parquet")
        schema = table.schema
    assert schema is not None
    return schema


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--max-files-per-trigger", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from pyspark.sql.pandas.types import from_arrow_schema

    from lakefeed.session import spark_session

    work = Path(tempfile.mkdtemp(prefix="delta-bench-"))
    try:
        arrow_schema = generate(work / "input", args.rows, args.files)
        spark = spark_session("delta-bench", master=args.master, conf={"spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        schema = from_arrow_schema(arrow_schema)
        limit = str(args.max_files_per_trigger)

        def stream_input():
            return (
                spark.readStream.schema(schema)
                .option("maxFilesPerTrigger", limit)
                .parquet(str(work / "input"))
            )

        def sink(fmt: str, attempt: int) -> Callable[[], None]:
            def run() -> None:
                out, cp = work / f"{fmt}-out-{attempt}", work / f"{fmt}-cp-{attempt}"
                query = (
                    stream_input()
                    .writeStream.format(fmt)
                    .option("checkpointLocation", str(cp))
                    .trigger(availableNow=True)
                    .start(str(out))
                )
                query.awaitTermination()

            return run

        def source(fmt: str, attempt: int, table: Path) -> Callable[[], None]:
            def run() -> None:
                reader = spark.readStream.option("maxFilesPerTrigger", limit)
                frame = (
                    reader.schema(schema).parquet(str(table))
                    if fmt == "parquet"
                    else reader.format("delta").load(str(table))
                )
                query = (
                    frame.writeStream.format("noop")
                    .option("checkpointLocation", str(work / f"src-{fmt}-cp-{attempt}"))
                    .trigger(availableNow=True)
                    .start()
                )
                query.awaitTermination()

            return run

        # Warm up the JVM and the Python workers once per path.
        sink("parquet", 99)()
        sink("delta", 99)()
        results: dict[str, list[float]] = {
            k: [] for k in ("pq-sink", "delta-sink", "pq-src", "delta-src")
        }
        for attempt in range(args.repeats):
            results["pq-sink"].append(timed(sink("parquet", attempt)))
            results["delta-sink"].append(timed(sink("delta", attempt)))
            table = work / "delta-out-99"  # a Delta table; its data files are plain parquet
            results["pq-src"].append(timed(source("parquet", attempt, table)))
            results["delta-src"].append(timed(source("delta", attempt, table)))
        from deltalake import DeltaTable

        written = DeltaTable(str(work / "delta-out-0")).to_pyarrow_dataset().count_rows()
        assert written == args.rows // args.files * args.files, written
        rows = written
        rate = {k: rows / min(v) for k, v in results.items()}
        print(f"rows={rows:,} files={args.files} maxFilesPerTrigger={limit} master={args.master}")
        for key, seconds in results.items():
            print(
                f"  {key:<11} best {min(seconds):6.2f} s  {rate[key]:>12,.0f} rows/s  "
                f"(runs: {', '.join(f'{s:.2f}' for s in seconds)})"
            )
        sink_ratio = rate["delta-sink"] / rate["pq-sink"]
        source_ratio = rate["delta-src"] / rate["pq-src"]
        print(f"sink ratio   delta/parquet = {sink_ratio:.2f}x (target >= 0.9)")
        print(f"source ratio delta/parquet = {source_ratio:.2f}x (target >= 0.8)")
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
