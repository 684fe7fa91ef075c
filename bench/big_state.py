"""Big state: a dedup over ``--ids`` distinct ids and session windows over ``--users`` users,
in RocksDB with bounded memory (``lakefeed.state.memory``) on ``local[2]``.

Each workload is the pipeline of :mod:`bench.big_state_flows` run by ``lf.run`` in available-now
mode over Parquet files the bench writes first, one file per micro-batch:

- **dedup**: ``--dedup-batches`` files of ``ids / batches`` new ids each, plus 10% ids of the
  previous file again (dropped as duplicates), event time one second further per file; one leg
  per ``--dedup-ops`` entry, each on its own files and checkpoint: ``within-watermark``
  (Spark's ``dropDuplicatesWithinWatermark``, the baseline), ``ttl``
  (``lf.drop_duplicates_within_ttl``: one row per key, swept by bucket timers), ``keys``
  (``dropDuplicates``, no eviction at all);
- **sessions**: ``--session-batches`` files of ``users × --events-per-user / batches`` events,
  users in turn, so each user comes back every ``users / rows-per-batch`` files and its session
  (gap one hour) grows and stays open. The first ``users / rows-per-batch`` batches only open
  sessions (each user's first events): a warm-up, left out of the verdict's quarters, which
  compare batches that all merge into stored sessions.

Per micro-batch (a listener on the session): its duration, the state rows and state memory of
the operator (``stateOperators``: ``numRowsTotal``, ``memoryUsedBytes`` and RocksDB's
``customMetrics``), and the RSS of the Python driver, the JVM (driver and executor in local mode,
RocksDB's native memory included) and the Python workers. Then the checkpoint's size on disk,
and a restart: the SparkContext is stopped, one more file lands, and a new session runs the
pipeline again on the same checkpoint: the time from ``lf.run`` to its first batch, which loads
the state back. Every id / user is checked at the end (rows in the table, rows in the state).

The verdicts compare the run with itself: median batch time of the last quarter of batches
over the first quarter's, after the warm-up (the first batch; for sessions every batch until
each user has been seen), stable when ≤ 1.5x, and the JVM's RSS growth over the same quarters.
The dedup legs are also compared with the first leg: run time and median batch time.

    .venv/bin/python -m bench.big_state                       # 10M ids, 1M users (full)
    .venv/bin/python -m bench.big_state --quick               # 20k ids, 2k users (smoke)

A run with bench/results/ttl_dedup.json's arguments rewrites that file (the performance page's
row for the TTL dedup leg; see bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener

import lakefeed as lf
from bench.procs import tree_usage
from bench.results import Run, add_option, count
from lakefeed.core.options import parse_bytes
from lakefeed.pipeline.dedup import BUCKETS
from lakefeed.runtime.state_memory import ROCKSDB

FLOWS = Path(__file__).resolve().with_name("big_state_flows.py")
TABLES = {"dedup": "unique_ids", "sessions": "user_sessions"}
START = datetime(2026, 1, 1, tzinfo=UTC)
MIB = 1024 * 1024
STABLE = 1.5  # last quarter's median batch time over the first quarter's
SPIKE = 3.0  # the worst batch after the warm-up over the first quarter's median
LAST = 3  # the last batches, judged one by one (a state outgrowing its cache slows the end)
ROCKSDB_SHOWN = ("boundedMemoryUsage", "maxMemoryUsageMB")


@dataclass
class Batch:
    batch_id: int
    at_s: float  # when its progress arrived, seconds after the run was asked to start
    duration_ms: float
    input_rows: int
    state_rows: int
    state_mib: float  # memoryUsedBytes of the stateful operator
    pinned_mib: float  # RocksDB's pinned blocks (customMetrics)
    sst_mib: float  # RocksDB's SST files
    evict_read: int  # state rows read to find expired ones (customMetrics)
    load_ms: float  # loading the state store (customMetrics: rocksdbLoadLatencyMs)
    replayed: int  # changelog files replayed by that load (rocksdbNumReplayChangelogFiles)
    snapshot: int  # the oldest of the partitions' last uploaded snapshot versions (-1: none)
    # where RocksDB's time went in this batch (customMetrics, summed over partitions)
    gets: int  # rocksdbGetCount: lookups
    get_ms: float  # rocksdbGetLatency: their time
    cache_hits: int  # rocksdbReadBlockCacheHitCount: blocks found in the shared cache
    cache_misses: int  # rocksdbReadBlockCacheMissCount: blocks read from SST files
    stall_ms: float  # rocksdbWriterStallLatencyMs: writes waiting for a flush or compaction
    compaction_ms: float  # rocksdbTotalCompactionLatencyMs
    flushed_mib: float  # rocksdbTotalBytesWrittenByFlush: memtables written out
    driver_mib: float
    jvm_mib: float
    workers_mib: float


@dataclass
class Workload:
    name: str
    operator: str
    rows_per_batch: int
    expected_state_rows: int
    warmup: int = 1  # batches left out of the quarters (the first pays the query's start)
    batches: list[Batch] = field(default_factory=list)
    run_s: float = 0.0
    checkpoint_mib: float = 0.0
    state_mib_on_disk: float = 0.0
    restart_first_batch_s: float | None = None
    restart_batch: Batch | None = None
    table_rows: int = 0
    expected_table_rows: int = 0
    # state rows an operator may keep beside one per key: the TTL dedup's sweep time per bucket
    bookkeeping_rows: int = 0
    custom_metrics: dict[str, float] = field(default_factory=dict)  # the last batch's
    # Spark's RocksDB settings as the run left them (lakefeed.state.memory mapped to them)
    rocksdb_conf: dict[str, str] = field(default_factory=dict)

    def verdicts(self) -> dict[str, Any]:
        """Batch time and JVM RSS: last quarter over first quarter (the warm-up's batches left
        out), the worst batch and each of the last ones over the first quarter's median (a
        median hides a few slow batches at the end, where a state outgrowing its cache shows
        first), and whether every id / user is accounted for."""
        warm = self.batches[self.warmup :] or self.batches
        quarter = max(1, len(warm) // 4)
        head, tail = warm[:quarter], warm[-quarter:]
        time_ratio = _ratio([b.duration_ms for b in tail], [b.duration_ms for b in head])
        rss_ratio = _ratio([b.jvm_mib for b in tail], [b.jvm_mib for b in head])
        worst = max(warm, key=lambda b: b.duration_ms, default=None)
        head_ms = [b.duration_ms for b in head]
        worst_ratio = _ratio([worst.duration_ms], head_ms) if worst else None
        last_ratios = [_ratio([b.duration_ms], head_ms) for b in warm[-LAST:]]
        final_state = self.batches[-1].state_rows if self.batches else 0
        return {
            "warmup_batches": self.warmup,
            "median_batch_ms": statistics.median(b.duration_ms for b in warm) if warm else None,
            "batch_time_last_over_first_quarter": time_ratio,
            "worst_batch": worst.batch_id if worst else None,
            "worst_batch_over_first_quarter": worst_ratio,
            "last_batches_over_first_quarter": last_ratios,
            "batch_time_stable": time_ratio is not None
            and time_ratio <= STABLE
            and worst_ratio is not None
            and worst_ratio <= SPIKE,
            "jvm_rss_last_over_first_quarter": rss_ratio,
            "max_jvm_mib": max((b.jvm_mib for b in self.batches), default=0.0),
            "max_state_mib": max((b.state_mib for b in self.batches), default=0.0),
            "state_rows": final_state,
            "state_rows_as_expected": 0
            <= final_state - self.expected_state_rows
            <= self.bookkeeping_rows,
            "table_rows_as_expected": self.table_rows == self.expected_table_rows,
        }


def _snapshots(metrics: dict[str, float]) -> list[float]:
    return [v for k, v in metrics.items() if k.startswith("SnapshotLastUploaded.")]


def _misses_per_get(batch: Batch) -> float:
    return batch.cache_misses / batch.gets if batch.gets else 0.0


def _ratio(tail: list[float], head: list[float]) -> float | None:
    base = statistics.median(head) if head else 0
    return round(statistics.median(tail) / base, 2) if base else None


class BatchRecorder(StreamingQueryListener):
    """Every micro-batch's progress with the process tree's memory when it arrived."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.custom: dict[str, float] = {}
        self.started = time.monotonic()
        self.terminated = threading.Event()

    def reset(self) -> None:
        self.batches, self.started = [], time.monotonic()
        self.terminated.clear()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        self.terminated.set()

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if not progress.numInputRows or not progress.stateOperators:
            return
        state = progress.stateOperators[0]
        metrics = {k: float(v) for k, v in (state.customMetrics or {}).items()}
        usage = tree_usage()
        self.custom = metrics
        self.batches.append(
            Batch(
                batch_id=progress.batchId,
                at_s=round(time.monotonic() - self.started, 2),
                duration_ms=float(progress.durationMs.get("triggerExecution", 0)),
                input_rows=progress.numInputRows,
                state_rows=state.numRowsTotal,
                state_mib=round(state.memoryUsedBytes / MIB, 1),
                pinned_mib=round(metrics.get("rocksdbPinnedBlocksMemoryUsage", 0) / MIB, 1),
                sst_mib=round(metrics.get("rocksdbSstFileSize", 0) / MIB, 1),
                evict_read=int(metrics.get("numRowsReadDuringEviction", 0)),
                load_ms=metrics.get("rocksdbLoadLatencyMs", 0),
                replayed=int(metrics.get("rocksdbNumReplayChangelogFiles", 0)),
                snapshot=int(min(_snapshots(metrics), default=-1)),
                gets=int(metrics.get("rocksdbGetCount", 0)),
                get_ms=metrics.get("rocksdbGetLatency", 0),
                cache_hits=int(metrics.get("rocksdbReadBlockCacheHitCount", 0)),
                cache_misses=int(metrics.get("rocksdbReadBlockCacheMissCount", 0)),
                stall_ms=metrics.get("rocksdbWriterStallLatencyMs", 0),
                compaction_ms=metrics.get("rocksdbTotalCompactionLatencyMs", 0),
                flushed_mib=round(metrics.get("rocksdbTotalBytesWrittenByFlush", 0) / MIB, 1),
                driver_mib=round(usage.driver.rss_bytes / MIB),
                jvm_mib=round(usage.jvm.rss_bytes / MIB),
                workers_mib=round(usage.workers.rss_bytes / MIB),
            )
        )


# --- input: one Parquet file per micro-batch ------------------------------------------------


def _write(landing: Path, index: int, columns: dict[str, np.ndarray]) -> None:
    seconds = np.full(len(next(iter(columns.values()))), index, dtype="int64")
    stamps = (np.datetime64(START.replace(tzinfo=None), "us") + seconds * 1_000_000).astype(
        "datetime64[us]"
    )
    table = pa.table({**columns, "ts": pa.array(stamps, pa.timestamp("us", tz="UTC"))})
    pq.write_table(table, landing / f"batch-{index:05d}.parquet")


def dedup_file(landing: Path, index: int, per_batch: int) -> None:
    """``per_batch`` new ids, then every tenth id of the previous file again."""
    fresh = np.arange(index * per_batch, (index + 1) * per_batch, dtype="int64")
    again = fresh[::10] - per_batch if index else np.empty(0, dtype="int64")
    _write(landing, index, {"id": np.concatenate([fresh, again])})


def session_file(landing: Path, index: int, per_batch: int, users: int) -> None:
    """``per_batch`` events of users in turn (user = event number modulo users)."""
    events = np.arange(index * per_batch, (index + 1) * per_batch, dtype="int64")
    _write(landing, index, {"user": events % users})


# --- running -------------------------------------------------------------------------------


def _session(conf: dict[str, str], recorder: BatchRecorder) -> SparkSession:
    spark = lf.spark_session(master="local[2]", conf=conf)
    spark.streams.addListener(recorder)
    return spark


def _run(spark: SparkSession, lakehouse: Path, conf: dict[str, str], rec: BatchRecorder) -> float:
    rec.reset()
    started = time.monotonic()
    result = lf.run(FLOWS, lakehouse=lakehouse, mode="available-now", conf=conf, spark=spark)
    elapsed = time.monotonic() - started
    if not result.ok:
        raise SystemExit(f"run failed: {result.errors}")
    rec.terminated.wait(30)  # the bus delivers the last progress after the query ends
    return elapsed


def _size_mib(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / MIB, 1)


def run_workload(
    files: int, write_file: Any, base: Workload, args: argparse.Namespace, root: Path, op: str = ""
) -> Workload:
    """Write the files, run, measure the checkpoint, restart on one more file."""
    name = base.name
    leg = root / f"{name}-{op}" if op else root / name
    landing, lakehouse = leg / "landing", leg / "lakehouse"
    landing.mkdir(parents=True)
    for index in range(files):
        write_file(landing, index)
    conf = {
        "bigstate.workload": name,
        "bigstate.landing": str(landing),
        "lakefeed.state.memory": args.state_memory,
        "bigstate.dedup": op,
    }
    recorder = BatchRecorder()
    spark = _session(args.spark_conf, recorder)
    base.run_s = round(_run(spark, lakehouse, conf, recorder), 1)
    base.batches = list(recorder.batches)
    base.custom_metrics = recorder.custom
    base.rocksdb_conf = {k: str(spark.conf.get(ROCKSDB + k, "unset")) for k in ROCKSDB_SHOWN}
    checkpoint = lakehouse / "checkpoints" / TABLES[name]
    base.checkpoint_mib = _size_mib(checkpoint)
    base.state_mib_on_disk = _size_mib(checkpoint / "state")
    spark.stop()  # a restart: the next session's state stores load from the checkpoint
    write_file(landing, files)
    spark = _session(args.spark_conf, recorder)
    _run(spark, lakehouse, conf, recorder)
    if recorder.batches:
        base.restart_batch = recorder.batches[0]
        base.restart_first_batch_s = recorder.batches[0].at_s
    base.table_rows = (
        DeltaTable(str(lakehouse / "tables" / TABLES[name])).to_pyarrow_dataset().count_rows()
    )
    spark.stop()
    return base


DEDUP_OPS = {
    "within-watermark": "dropDuplicatesWithinWatermark",
    "ttl": "lf.drop_duplicates_within_ttl",
    "keys": "dropDuplicates",
}


def dedup(args: argparse.Namespace, root: Path, op: str) -> Workload:
    per_batch = args.ids // args.dedup_batches
    total = per_batch * args.dedup_batches
    base = Workload("dedup", DEDUP_OPS[op], per_batch, expected_state_rows=total)
    base.expected_table_rows = total + per_batch  # the restart's file brings new ids too
    if op == "ttl":
        base.bookkeeping_rows = BUCKETS  # a sweep time per bucket
    write = lambda landing, i: dedup_file(landing, i, per_batch)  # noqa: E731
    return run_workload(args.dedup_batches, write, base, args, root, op)


def sessions(args: argparse.Namespace, root: Path) -> Workload:
    per_batch = args.users * args.events_per_user // args.session_batches
    base = Workload(
        "sessions",
        "session_window",
        per_batch,
        expected_state_rows=min(args.users, per_batch * args.session_batches),
        # until every user has been seen a batch only opens sessions; from then on each merges
        warmup=max(1, math.ceil(args.users / per_batch)),
    )
    base.expected_table_rows = 0  # the gap outlasts the run: every session is still open
    write = lambda landing, i: session_file(landing, i, per_batch, args.users)  # noqa: E731
    return run_workload(args.session_batches, write, base, args, root)


# --- report --------------------------------------------------------------------------------


def _print_batches(batches: list[Batch]) -> None:
    print(
        f"{'batch':>6}{'ms':>7}{'rows in':>9}{'state rows':>12}{'state MiB':>10}{'pinned':>7}"
        f"{'sst MiB':>8}{'evict read':>11}{'get ms':>8}{'cache hit':>10}{'miss':>9}"
        f"{'stall ms':>9}{'compact ms':>11}{'flushed':>8}{'driver':>7}{'jvm':>6}{'workers':>8}"
    )
    for b in batches:
        print(
            f"{b.batch_id:>6}{b.duration_ms:>7.0f}{b.input_rows:>9,}{b.state_rows:>12,}"
            f"{b.state_mib:>10.1f}{b.pinned_mib:>7.1f}{b.sst_mib:>8.1f}{b.evict_read:>11,}"
            f"{b.get_ms:>8.0f}{b.cache_hits:>10,}{b.cache_misses:>9,}{b.stall_ms:>9.0f}"
            f"{b.compaction_ms:>11.0f}{b.flushed_mib:>8.1f}{b.driver_mib:>7.0f}{b.jvm_mib:>6.0f}{b.workers_mib:>8.0f}"
        )


def report(work: Workload, cap: str) -> dict[str, Any]:
    """Print the batches and the verdicts; the results as a dict (for ``--json``)."""
    print(
        f"\n== {work.name} ({work.operator}): {len(work.batches)} batches of "
        f"{work.rows_per_batch:,} rows, {cap} (Spark: {work.rocksdb_conf})"
    )
    _print_batches(work.batches)
    verdicts = work.verdicts()
    cap_mib = (parse_bytes(cap) or 0) / MIB
    verdicts["state_memory_within_cap"] = verdicts["max_state_mib"] <= cap_mib
    ratio, restart = verdicts["batch_time_last_over_first_quarter"], work.restart_batch
    print(
        f"run {work.run_s:.1f} s; checkpoint on disk {work.checkpoint_mib:.1f} MiB "
        f"(state {work.state_mib_on_disk:.1f} MiB)"
    )
    if restart is not None:
        print(
            f"restart: first batch done {work.restart_first_batch_s:.1f} s after lf.run; the "
            f"batch {restart.duration_ms:.0f} ms, state load {restart.load_ms:.0f} ms summed over "
            f"partitions "
            f"({restart.replayed} changelog files replayed; last snapshot uploaded before it: "
            f"version {work.batches[-1].snapshot if work.batches else -1}), "
            f"state rows {restart.state_rows:,}"
        )
    warmup = (
        "the first batch"
        if work.warmup == 1
        else f"the first {work.warmup} batches (warm-up: each user's first events open sessions)"
    )
    print(
        f"batch time, last/first quarter (medians): {ratio}x; worst batch "
        f"{verdicts['worst_batch']}: {verdicts['worst_batch_over_first_quarter']}x; last "
        f"{LAST} batches: {', '.join(f'{r}x' for r in verdicts['last_batches_over_first_quarter'])}"
        f" (each over the first quarter's median) -> "
        f"{'stable' if verdicts['batch_time_stable'] else 'NOT stable'} (targets: medians <= "
        f"{STABLE}x, every batch <= {SPIKE}x; {warmup} left out)"
    )
    thrash = max(work.batches[work.warmup :], key=_misses_per_get, default=None)
    if thrash is not None and thrash.gets:
        print(
            f"RocksDB block cache: most misses per lookup in batch {thrash.batch_id}: "
            f"{_misses_per_get(thrash):.2f} ({thrash.cache_misses:,} misses, {thrash.gets:,} "
            f"gets taking {thrash.get_ms:,.0f} ms summed; healthy: under 0.05, and each state "
            f"store whose filter the cache cannot keep adds ~1/partitions: "
            f"lakefeed.runtime.state_memory)"
        )
    print(
        f"state memory max {verdicts['max_state_mib']:.1f} MiB of the {cap} cap -> "
        f"{'bounded' if verdicts['state_memory_within_cap'] else 'OVER the cap'}; JVM RSS "
        f"last/first quarter {verdicts['jvm_rss_last_over_first_quarter']}x, "
        f"max {verdicts['max_jvm_mib']:.0f} MiB"
    )
    print(
        f"state rows {verdicts['state_rows']:,} (expected {work.expected_state_rows:,}"
        f"{f' + up to {work.bookkeeping_rows:,} sweep times' if work.bookkeeping_rows else ''}); "
        f"table rows {work.table_rows:,} (expected {work.expected_table_rows:,})"
    )
    return {**asdict(work), "verdicts": verdicts}


def compare_legs(results: dict[str, dict[str, Any]]) -> None:
    """Each dedup leg against the first: run time and median batch time (same script, files
    and machine), and its own last/first quarter ratio."""
    if len(results) < 2:
        return
    base = next(iter(results.values()))
    print(f"\n== dedup legs against {base['operator']} (ratios: leg / baseline)")
    for name, leg in results.items():
        verdicts, base_verdicts = leg["verdicts"], base["verdicts"]
        print(
            f"{name:<24} run {leg['run_s']:>7.1f} s ({leg['run_s'] / base['run_s']:.2f}x), "
            f"median batch {verdicts['median_batch_ms']:>7.0f} ms "
            f"({verdicts['median_batch_ms'] / base_verdicts['median_batch_ms']:.2f}x), "
            f"last/first quarter {verdicts['batch_time_last_over_first_quarter']}x, worst batch "
            f"{verdicts['worst_batch_over_first_quarter']}x, "
            f"evict read (last batch) {leg['batches'][-1]['evict_read']:,}"
        )


def _record_ttl(run: Run, verdicts: dict[str, Any], args: argparse.Namespace) -> None:
    """The performance page's row: the TTL dedup stays flat within its memory cap."""
    kept = verdicts["batch_time_stable"] and verdicts["state_memory_within_cap"]
    run.record(
        "ttl_dedup",
        benchmark=f"TTL dedup, {count(args.ids)} keys",
        workload=f"`lakefeed.state.memory={args.state_memory}`, Avro state",
        baseline="its own first vs last quarter",
        order=140,
        shown=f"batch time {verdicts['batch_time_last_over_first_quarter']}x, "
        f"{verdicts['max_state_mib']:.0f} MiB",
        target_text="bounded, flat",
        verdict="met" if kept else "missed",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ids", type=int, default=10_000_000)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--dedup-batches", type=int, default=40)
    parser.add_argument("--session-batches", type=int, default=40)
    parser.add_argument("--events-per-user", type=int, default=4)
    parser.add_argument("--state-memory", default="256m", help="lakefeed.state.memory")
    parser.add_argument("--workloads", default="dedup,sessions")
    parser.add_argument(
        "--dedup-ops",
        default="within-watermark,ttl",
        help="dedup legs, the first the baseline: "
        + ", ".join(f"{op} ({name})" for op, name in DEDUP_OPS.items()),
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the sessions (e.g. "
        "spark.sql.streaming.stateStore.minDeltasForSnapshot=5), repeatable",
    )
    parser.add_argument("--quick", action="store_true", help="20k ids, 2k users, few batches")
    parser.add_argument("--json", type=Path, help="write the results here too")
    add_option(parser)
    args = parser.parse_args(argv)
    run = Run.begin(parser, ["ttl_dedup"], sys.argv[1:] if argv is None else argv)
    if args.quick:
        args.ids, args.users, args.dedup_batches, args.session_batches = 20_000, 2_000, 3, 2
    args.spark_conf = dict(item.split("=", 1) for item in args.conf)
    root = Path(tempfile.mkdtemp(prefix="lakefeed-bigstate-"))
    legs = {f"dedup:{op}": partial(dedup, op=op) for op in args.dedup_ops.split(",")}
    runs = {"dedup": list(legs), "sessions": ["sessions"]}
    legs["sessions"] = sessions
    results: dict[str, Any] = {}
    try:
        for name in (leg for workload in args.workloads.split(",") for leg in runs[workload]):
            results[name] = report(legs[name](args, root), args.state_memory)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    compare_legs({k: v for k, v in results.items() if k.startswith("dedup:")})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    if "dedup:ttl" in results:
        _record_ttl(run, results["dedup:ttl"]["verdicts"], args)
    fine = all(
        r["verdicts"]["state_rows_as_expected"] and r["verdicts"]["table_rows_as_expected"]
        for r in results.values()
    )
    return 0 if fine else 1


if __name__ == "__main__":
    raise SystemExit(main())
