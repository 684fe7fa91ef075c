"""Streaming upserts: lakefeed's foreachBatch MERGE vs delta-rs's own merge vs the append sink.

One process, one SparkSession, the same change batches for every leg. A target of ``--rows``
rows (id, value, counter, status, UTC timestamp) is built once with delta-rs and copied for
each MERGE leg; each batch holds ``--changed`` x rows distinct keys, most of them existing ids
(updates) and ``--insert-share`` of them new ids (inserts), written as one Parquet file:

  lakefeed: readStream.parquet(batches, maxFilesPerTrigger=1) -> foreachBatch:
            DeltaTable.forPath(...).alias("t").merge(df.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll().whenNotMatchedInsertAll()
            .withTransaction(app_id, batch_id).execute()
            (what docs/sinks.md tells users to write; the keyed ``@lf.table(keys=[...])`` path
            runs the same builder, lakefeed/runtime/upsert.py)
  delta-rs: for each batch file, pyarrow reads it and deltalake.DeltaTable.merge(...)
            .when_matched_update_all().when_not_matched_insert_all().execute() on one handle
            (the baseline: no Spark at all)
  append:   readStream.parquet(batches) -> writeStream.format("delta") (lakefeed's streaming
            Delta append, exactly once through its txn) into a new table: for scale

Prints rows/s per leg (source rows over the leg's wall time, query start included), the
ratios (target: lakefeed >= 0.8x delta-rs), and where each MERGE leg's time goes, summed over
batches: the Spark -> Arrow hand-off, delta-rs's scan and rewrite (its own metrics) and the rest
of its execute (planning and the commit), lakefeed's own work in foreachBatch, and Spark's
micro-batch overhead (query start, planning, offset and commit logs). The two MERGE results
are checked equal.

    .venv/bin/python -m bench.merge_bench --rows 10000000 --changed 0.01 --batches 5

That run writes bench/results/merge.json (the performance page's row); see bench/results.py.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.results import Run, add_option, count

APP_ID = "merge-bench"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("value", pa.float64()),
        ("counter", pa.int64()),
        ("status", pa.string()),
        ("ts", pa.timestamp("us", "UTC")),
    ]
)
CHUNK = 1_000_000
WARM_ROWS = 50_000


def rows_for(ids: np.ndarray, rng: np.random.Generator, generation: int) -> pa.Table:
    """Rows for ``ids``; ``generation`` marks which batch last wrote them (0: the target)."""
    stamp = (1_700_000_000_000_000 + ids * 1000 + generation * 10**12).astype("datetime64[us]")
    return pa.table(
        {
            "id": ids,
            "value": rng.normal(20, 5, len(ids)),
            "counter": np.full(len(ids), generation, dtype=np.int64),
            "status": pa.array(np.where(ids % 97 == 0, "alert", "ok")),
            "ts": pa.array(stamp).cast(pa.timestamp("us", "UTC")),
        },
        schema=SCHEMA,
    )


def build_target(path: Path, rows: int) -> None:
    """The target in one delta-rs commit, written chunk by chunk (never all rows in memory)."""
    from deltalake import write_deltalake

    rng = np.random.default_rng(1)

    def chunks() -> Iterator[pa.RecordBatch]:
        for start in range(0, rows, CHUNK):
            ids = np.arange(start, min(start + CHUNK, rows), dtype=np.int64)
            yield from rows_for(ids, rng, 0).to_batches()

    write_deltalake(str(path), pa.RecordBatchReader.from_batches(SCHEMA, chunks()))


def write_batches(folder: Path, rows: int, changed: float, insert_share: float, count: int) -> int:
    """``count`` Parquet files of distinct keys each; returns the rows per batch."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(2)
    size = max(1, int(rows * changed))
    inserts = int(size * insert_share)
    next_new = rows
    for index in range(count):
        updates = np.unique(rng.integers(0, rows, size - inserts + size // 50))[: size - inserts]
        new = np.arange(next_new, next_new + inserts, dtype=np.int64)
        next_new += inserts
        ids = rng.permutation(np.concatenate([updates.astype(np.int64), new]))
        pq.write_table(rows_for(ids, rng, index + 1), folder / f"batch-{index:05d}.parquet")
    return size


@dataclass
class Phases:
    """Seconds spent per phase, summed over a leg's batches."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, spent: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + spent

    def add_merge_metrics(self, metrics: dict[str, Any], wall: float) -> None:
        """delta-rs's own figures: scan and rewrite; the rest of execute is planning + commit."""
        scan, rewrite = metrics["scan_time_ms"] / 1000, metrics["rewrite_time_ms"] / 1000
        self.add("delta-rs scan", scan)
        self.add("delta-rs rewrite", rewrite)
        self.add("delta-rs plan + commit", max(0.0, wall - scan - rewrite))


class MergeProbe:
    """Times the hand-off and delta-rs's execute inside lakefeed's MERGE, without changing it:
    wraps ``lakefeed.compat.delta_spark.merge.arrow_of`` and ``deltalake``'s
    ``TableMerger.execute``."""

    def __init__(self) -> None:
        self.phases = Phases()
        self._undo: list[Callable[[], None]] = []

    def _wrap(self, owner: Any, name: str, record: Callable[[Any, float], None]) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            result = original(*args, **kwargs)
            record(result, time.perf_counter() - start)
            return result

        setattr(owner, name, timed)
        self._undo.append(lambda: setattr(owner, name, original))

    def __enter__(self) -> MergeProbe:
        import deltalake.table

        import lakefeed.compat.delta_spark.merge

        self._wrap(
            lakefeed.compat.delta_spark.merge,
            "arrow_of",
            lambda _, spent: self.phases.add("Spark -> Arrow hand-off", spent),
        )
        self._wrap(deltalake.table.TableMerger, "execute", self.phases.add_merge_metrics)
        return self

    def __exit__(self, *exc: object) -> None:
        for undo in reversed(self._undo):
            undo()


def delta_rs_leg(target: Path, batches: list[Path], phases: Phases) -> float:
    from deltalake import DeltaTable

    start = time.perf_counter()
    table = DeltaTable(str(target))
    for path in batches:
        began = time.perf_counter()
        source = pq.read_table(path)
        phases.add("Parquet read (pyarrow)", time.perf_counter() - began)
        began = time.perf_counter()
        metrics = (
            table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        phases.add_merge_metrics(metrics, time.perf_counter() - began)
    return time.perf_counter() - start


def lakefeed_leg(spark: Any, folder: Path, target: Path, checkpoint: Path, phases: Phases) -> float:
    from pyspark.sql import DataFrame
    from pyspark.sql.pandas.types import from_arrow_schema

    from lakefeed.compat.delta_spark import DeltaTable

    def upsert(batch: DataFrame, batch_id: int) -> None:
        began = time.perf_counter()
        (
            DeltaTable.forPath(batch.sparkSession, str(target))
            .alias("t")
            .merge(batch.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .withTransaction(APP_ID, batch_id)
            .execute()
        )
        phases.add("foreachBatch", time.perf_counter() - began)

    start = time.perf_counter()
    query = (
        spark.readStream.schema(from_arrow_schema(SCHEMA))
        .option("maxFilesPerTrigger", 1)
        .parquet(str(folder))
        .writeStream.foreachBatch(upsert)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall = time.perf_counter() - start
    inside = phases.seconds.pop("foreachBatch", 0.0)
    phases.add("lakefeed in foreachBatch (rest)", inside - sum(phases.seconds.values()))
    spark_phases(query.recentProgress, inside, wall, phases)
    return wall


SPARK_PHASES = {
    "Spark: offsets, file listing": ("latestOffset", "getBatch"),
    "Spark: offset + commit logs": ("walCommit", "commitOffsets"),
    "Spark: batch planning": ("queryPlanning",),
}


def spark_phases(progress: list[Any], inside: float, wall: float, phases: Phases) -> None:
    """Spark's share of a foreachBatch query, from its progress reports' ``durationMs``."""

    def total(*keys: str) -> float:
        return sum(p.durationMs.get(k, 0) for p in progress for k in keys) / 1000

    for phase, keys in SPARK_PHASES.items():
        phases.add(phase, total(*keys))
    phases.add("Spark: foreachBatch call (Py4J)", total("addBatch") - inside)
    trigger = total("triggerExecution")
    accounted = sum(total(*keys) for keys in SPARK_PHASES.values()) + total("addBatch")
    phases.add("Spark: rest of the triggers", trigger - accounted)
    phases.add("Spark query start + stop", wall - trigger)


def append_leg(spark: Any, folder: Path, target: Path, checkpoint: Path) -> float:
    from pyspark.sql.pandas.types import from_arrow_schema

    start = time.perf_counter()
    query = (
        spark.readStream.schema(from_arrow_schema(SCHEMA))
        .option("maxFilesPerTrigger", 1)
        .parquet(str(folder))
        .writeStream.format("delta")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(target))
    )
    query.awaitTermination()
    return time.perf_counter() - start


def same_rows(left: Path, right: Path) -> bool:
    """Equal row counts and sums of counter and value (a float sum, whose rounding depends on
    the rows' order in the files: compared with a relative tolerance)."""
    from deltalake import DeltaTable

    sums = []
    for path in (left, right):
        table = DeltaTable(str(path)).to_pyarrow_table(columns=["value", "counter"])
        sums.append(
            (table.num_rows, pc.sum(table["counter"]).as_py(), pc.sum(table["value"]).as_py())
        )
    (rows, counter, value), (rows2, counter2, value2) = sums
    return rows == rows2 and counter == counter2 and math.isclose(value, value2, rel_tol=1e-9)


def row_count(path: Path) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_dataset().count_rows()


def breakdown(title: str, wall: float, phases: Phases) -> None:
    print(f"where {title}'s {wall:.2f} s go (summed over batches):")
    for phase, spent in phases.seconds.items():
        print(f"  {phase:<34} {spent:7.2f} s  {spent / wall:5.0%}")
    rest = wall - sum(phases.seconds.values())
    if abs(rest) >= 0.005:
        print(f"  {'rest':<34} {rest:7.2f} s  {rest / wall:5.0%}")


def parse_args() -> tuple[argparse.Namespace, Run]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="target rows")
    parser.add_argument("--changed", type=float, default=0.01, help="share of keys per batch")
    parser.add_argument("--insert-share", type=float, default=0.2, help="new keys in a batch")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--quick", action="store_true", help="200k rows, 2 batches, no warm-up (smoke)"
    )
    add_option(parser)
    args = parser.parse_args()
    run = Run.begin(parser, ["merge"], sys.argv[1:])
    if args.quick:
        args.rows, args.batches = 200_000, 2
    return args, run


def main() -> None:
    args, run = parse_args()
    from lakefeed.session import spark_session

    work = Path(tempfile.mkdtemp(prefix="merge-bench-"))
    try:
        began = time.perf_counter()
        build_target(work / "target", args.rows)
        if not args.quick:
            build_target(work / "warm", WARM_ROWS)
            write_batches(work / "warm-input", WARM_ROWS, args.changed, args.insert_share, 1)
        size = write_batches(
            work / "input", args.rows, args.changed, args.insert_share, args.batches
        )
        batches = sorted((work / "input").glob("*.parquet"))
        print(f"setup (target + batches) {time.perf_counter() - began:.1f} s")
        spark = spark_session("merge-bench", master=args.master, conf={"spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("ERROR")

        if not args.quick:  # the smoke run only proves the script works
            # Warm up the JVM, the Python workers and delta-rs on a small table of its own.
            lakefeed_leg(spark, work / "warm-input", work / "warm", work / "warm-cp", Phases())
            append_leg(spark, work / "warm-input", work / "warm-append", work / "warm-append-cp")

        shutil.copytree(work / "target", work / "rs")
        shutil.copytree(work / "target", work / "lf")
        rs_phases = Phases()
        rs_wall = delta_rs_leg(work / "rs", batches, rs_phases)
        with MergeProbe() as probe:
            lf_wall = lakefeed_leg(spark, work / "input", work / "lf", work / "lf-cp", probe.phases)
        append_wall = append_leg(spark, work / "input", work / "append", work / "append-cp")

        assert same_rows(work / "lf", work / "rs"), "lakefeed's MERGE result differs"
        rows = row_count(work / "rs")
        assert rows == args.rows + int(size * args.insert_share) * args.batches, rows
        assert row_count(work / "append") == size * args.batches
        total = size * args.batches
        rate = {
            "delta-rs": total / rs_wall,
            "lakefeed": total / lf_wall,
            "append": total / append_wall,
        }
        inserts = int(size * args.insert_share)
        print(
            f"rows={args.rows:,} changed={args.changed} ({size:,} keys/batch: "
            f"{size - inserts:,} updates, {inserts:,} inserts) batches={args.batches} "
            f"master={args.master}"
        )
        legs = (
            ("delta-rs", "delta-rs merge, direct (baseline)", rs_wall),
            ("lakefeed", "lakefeed foreachBatch MERGE + txn", lf_wall),
            ("append", "lakefeed Delta streaming append", append_wall),
        )
        for key, name, wall in legs:
            print(f"  {name:<36} {wall:7.2f} s  {rate[key]:>12,.0f} rows/s")
        ratio = rate["lakefeed"] / rate["delta-rs"]
        verdict = "met" if ratio >= 0.8 else "NOT met"
        print(f"upsert ratio lakefeed/delta-rs = {ratio:.2f}x (target >= 0.8: {verdict})")
        print(f"append/delta-rs merge = {rate['append'] / rate['delta-rs']:.2f}x (no target)")
        breakdown("lakefeed", lf_wall, probe.phases)
        breakdown("delta-rs", rs_wall, rs_phases)
        run.record(
            "merge",
            benchmark="Streaming upserts",
            workload=f"{count(args.rows)}-row target, {args.batches} batches of {count(size)} keys",
            baseline="delta-rs MERGE, no Spark",
            order=70,
            ratio=round(ratio, 2),
            target=0.8,
        )
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
