"""Deletion vectors: a small DELETE that marks rows instead of rewriting files, and what
reading such a table costs.

Two tables of the same ``--rows`` rows in ``--files`` files (id, k, value, tag; ``k`` a random
0..999, so ``k = 7`` picks about 0.1% of the rows, scattered over every file), written with
delta-rs, one with ``delta.enableDeletionVectors=true`` and one without. Then, in one run:

  delete: lakefeed's DELETE of ``k = 7`` on the first (``lakefeed.delta.operations.delete``:
          one deletion vector per file, no data file rewritten) vs delta-rs's copy-on-write
          DELETE of the same rows on the second (every file rewritten). Target >= 10x.
  batch:  ``spark.read.format("delta")`` of the first table (its files carry the vectors)
          -> noop, vs the same of the second (the same rows, rewritten without them).
          Target >= 0.8x.
  stream: ``readStream.format("delta")`` of each table (its snapshot, ``availableNow``)
          -> noop, likewise. Target >= 0.8x.

Answers are checked: both DELETEs remove the same number of rows; both tables then hold the same
count and sum of ids through delta-rs's kernel reader (``QueryBuilder``) and through Spark;
each streaming leg reads that many rows. Read legs are the best of ``--repeats``. The run
with the arguments ``bench/results/dv_*.json`` record rewrites them (docs' performance page;
see bench/results.py); any other writes them only with ``--results DIR``.

    .venv/bin/python -m bench.dv_bench --rows 10000000 --files 20 --repeats 2
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from bench.results import Run, add_option
from lakefeed.delta import create, operations
from lakefeed.session import spark_session

PREDICATE = "k = 7"
SCHEMA = pa.schema(
    [("id", pa.int64()), ("k", pa.int64()), ("value", pa.float64()), ("tag", pa.string())]
)


def build(root: Path, rows: int, files: int, vectors: bool) -> None:
    """The table: ``files`` appends of generated rows (the same rows for the same seed)."""
    create.create(
        str(root), SCHEMA, configuration={"delta.enableDeletionVectors": str(vectors).lower()}
    )
    per_file = rows // files
    generator = np.random.default_rng(7)
    for index in range(files):
        ids = np.arange(index * per_file, (index + 1) * per_file, dtype=np.int64)
        chunk = pa.table(
            {
                "id": ids,
                "k": generator.integers(0, 1000, per_file),
                "value": generator.random(per_file),
                "tag": pa.array(np.char.add("t", (ids % 97).astype(str))),
            },
            schema=SCHEMA,
        )
        write_deltalake(str(root), chunk, mode="append")


def kernel_answer(root: Path) -> tuple[int, int]:
    """(count, sum of ids) through delta-rs's DataFusion reader, which applies the vectors."""
    query = QueryBuilder().register("t", DeltaTable(str(root)))
    row = pa.table(query.execute("select count(*) as n, sum(id) as s from t")).to_pylist()[0]
    return int(row["n"]), int(row["s"])


def timed(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    out = run()
    return time.perf_counter() - start, out


def deletes(dv_root: Path, rs_root: Path) -> dict[str, float]:
    ours_s, ours = timed(lambda: operations.delete(str(dv_root), PREDICATE))
    theirs_s, theirs = timed(lambda: DeltaTable(str(rs_root)).delete(PREDICATE))
    assert isinstance(ours, dict) and isinstance(theirs, dict)
    assert ours["num_deletion_vectors_added"] > 0, "the DELETE did not write deletion vectors"
    assert ours["num_deleted_rows"] == theirs["num_deleted_rows"], (ours, theirs)
    answer = kernel_answer(dv_root)
    assert answer == kernel_answer(rs_root), "the two DELETEs left different rows"
    print(
        f"delete: lakefeed (vectors) {ours_s:.2f} s, delta-rs (rewrite) {theirs_s:.2f} s, "
        f"{ours['num_deleted_rows']} rows deleted; {answer[0]} rows left"
    )
    return {"lakefeed_s": ours_s, "delta_rs_s": theirs_s, "rows": float(answer[0])}


def reads(
    spark, dv_root: Path, rs_root: Path, repeats: int, rows: int, work: Path
) -> dict[str, float]:
    """Best-of-``repeats`` seconds of the batch and streaming legs of each table."""
    answer = kernel_answer(dv_root)
    for root in (dv_root, rs_root):
        frame = spark.read.format("delta").load(str(root))
        total = frame.selectExpr("count(*) AS n", "sum(id) AS s").collect()[0]
        assert (total.n, total.s) == answer, f"Spark's batch read of {root} is wrong"
        assert streamed(spark, root, work) == answer, f"Spark's stream of {root} is wrong"

    def batch(root: Path) -> None:
        spark.read.format("delta").load(str(root)).write.format("noop").mode("overwrite").save()

    def stream(root: Path, attempt: int) -> None:
        query = (
            spark.readStream.format("delta")
            .load(str(root))
            .writeStream.format("noop")
            .trigger(availableNow=True)
            .option("checkpointLocation", str(work / f"cp-{root.name}-{attempt}"))
            .start()
        )
        query.awaitTermination()

    best: dict[str, float] = {}
    for attempt in range(repeats):
        for name, root in (("dv", dv_root), ("plain", rs_root)):
            batch_s, _ = timed(lambda root=root: batch(root))
            stream_s, _ = timed(lambda root=root, attempt=attempt: stream(root, attempt))
            for kind, seconds in (("batch", batch_s), ("stream", stream_s)):
                key = f"{kind}-{name}"
                best[key] = min(best.get(key, seconds), seconds)
    for kind in ("batch", "stream"):
        dv_s, plain_s = best[f"{kind}-dv"], best[f"{kind}-plain"]
        print(
            f"{kind}: with vectors {dv_s:.2f} s, without {plain_s:.2f} s "
            f"({rows / dv_s:,.0f} vs {rows / plain_s:,.0f} rows/s)"
        )
    return best


def streamed(spark, root: Path, work: Path) -> tuple[int, int]:
    """(count, sum of ids) of a stream of the table's snapshot (untimed: the answer check;
    the progress' numInputRows counts the deleted positions too)."""
    totals: list[tuple[int, int]] = []

    def fold(frame, _batch: int) -> None:
        row = frame.selectExpr("count(*) AS n", "coalesce(sum(id), 0) AS s").collect()[0]
        totals.append((int(row.n), int(row.s)))

    query = (
        spark.readStream.format("delta")
        .load(str(root))
        .writeStream.foreachBatch(fold)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(work / f"check-{root.name}"))
        .start()
    )
    query.awaitTermination()
    return sum(n for n, _ in totals), sum(s for _, s in totals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    add_option(parser)
    args = parser.parse_args()
    run = Run.begin(parser, list(RESULTS), sys.argv[1:])

    work = Path(tempfile.mkdtemp(prefix="dv-bench-"))
    try:
        dv_root, rs_root = work / "with_dv", work / "without_dv"
        build(dv_root, args.rows, args.files, vectors=True)
        build(rs_root, args.rows, args.files, vectors=False)
        deleted = deletes(dv_root, rs_root)
        spark = spark_session("dv-bench", master="local[2]", conf={"spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        best = reads(spark, dv_root, rs_root, args.repeats, int(deleted["rows"]), work)
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratios = {
        "delete": deleted["delta_rs_s"] / deleted["lakefeed_s"],
        "batch": best["batch-plain"] / best["batch-dv"],
        "stream": best["stream-plain"] / best["stream-dv"],
    }
    print("ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    _record(run, args, ratios)


_WITHOUT = "the same rows without vectors"
RESULTS = {  # each leg's performance-page row: its file, its ratio's key, the row's fields
    "dv_delete": ("delete", "DELETE with deletion vectors", "delta-rs copy-on-write DELETE", 10),
    "dv_batch_read": ("batch", "Batch read with deletion vectors", _WITHOUT, 0.8),
    "dv_stream_read": ("stream", "Streaming read with deletion vectors", _WITHOUT, 0.8),
}


def _record(run: Run, args: argparse.Namespace, ratios: dict[str, float]) -> None:
    """Each leg's row (provenance from ``run``; written only as bench/results.py says)."""
    size = f"{args.rows / 1e6:g}M-row table, {args.files} files"
    for order, (name, (key, benchmark, baseline, target)) in enumerate(RESULTS.items()):
        reads = f"{size}, every file with a vector → noop"
        run.record(
            name,
            benchmark=benchmark,
            workload=f"0.1% of a {size}" if key == "delete" else reads,
            baseline=baseline,
            order=72 + 2 * order,
            ratio=round(ratios[key], 2),
            target=target,
        )


if __name__ == "__main__":
    main()
