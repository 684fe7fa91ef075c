"""How often the Delta stream sink reads its table's log per micro-batch (local disk, strace).

A stream of ``--batches`` one-file micro-batches into a Delta table (lakefeed's sink, either
writer) runs under ``strace -f``; the opens of ``_delta_log`` files (reads) and of the folder
(listings) are counted until the query ends, for ``--batches`` and twice as many: the
difference divided by the extra batches is the steady cost per batch, free of start-up and of
machine load (counts, not times). On S3 each read is a GET and each listing a LIST
(``bench.deploy`` counts those from moto's log).

    PYTHONPATH=$PWD PYSPARK_PYTHON=$PWD/.venv/bin/python \\
        .venv/bin/python -m bench.delta_log_reads --batches 10 --writer spark,python
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

END = "/lakefeed-bench-query-ended"
"""Stat'ed (it does not exist) when the query has ended: the count stops there."""


def stream(work: Path, writer: str, batches: int) -> None:
    """The traced process: ``batches`` parquet files, one per micro-batch, into Delta."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import lakefeed
    from lakefeed.connectors.delta import adapters

    source = work / "source"
    source.mkdir(parents=True)
    for i in range(batches):
        ids = list(range(i * 1000, (i + 1) * 1000))
        pq.write_table(pa.table({"id": ids, "k": ["a"] * 1000}), source / f"f{i:04d}.parquet")
    spark = lakefeed.spark_session(master="local[2]")
    frame = spark.readStream.schema("id long, k string").option("maxFilesPerTrigger", 1)
    query = adapters.write_stream(
        frame.parquet(str(source)),
        str(work / "table"),
        str(work / "checkpoint"),
        trigger={"availableNow": True},
        **{"lakefeed.writer": writer},
    )
    query.awaitTermination()
    os.path.exists(END)
    spark.stop()


def count(writer: str, batches: int) -> tuple[int, int]:
    """(log file opens, log folder listings) of a traced run until its query ended."""
    work = Path(tempfile.mkdtemp(prefix="delta-log-reads-"))
    trace = work / "strace.txt"
    try:
        child = [sys.executable, os.path.abspath(__file__), "--child", str(work)]
        subprocess.run(
            ["strace", "-f", "-qq", "-e", "trace=openat,newfstatat", "-o", str(trace)]
            + [*child, "--writer", writer, "--batches", str(batches)],
            check=False,
            capture_output=True,
        )
        opens = listings = 0
        for line in trace.read_text().splitlines():
            if END in line:
                break
            if "table/_delta_log" in line and "openat" in line and "ENOENT" not in line:
                listings += "O_DIRECTORY" in line
                opens += "O_DIRECTORY" not in line
        return opens, listings
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--writer", default="spark,python", help="comma list of spark, python")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        stream(args.child, args.writer, args.batches)
        return
    for writer in args.writer.split(","):
        (o1, l1), (o2, l2) = count(writer, args.batches), count(writer, 2 * args.batches)
        n = args.batches
        print(
            f"{writer:>6} writer: {n} batches {o1} reads {l1} listings; {2 * n} batches {o2} "
            f"reads {l2} listings; per batch {(o2 - o1) / n:.1f} reads {(l2 - l1) / n:.1f} "
            "listings of _delta_log"
        )


if __name__ == "__main__":
    main()
