"""Endurance: the IoT pipeline running continuously, sampled for growth.

Runs ``examples/iot`` in continuous mode on ``local[2]`` for ``--minutes`` at ``--rate`` events/s
(no backlog) in this process and, every ``--every`` seconds, samples:

- RSS, threads and open files of the driver (this process), its JVM and the Python workers;
- the micro-batches finished since the last sample (``triggerExecution`` of each query's
  progress) — their median duration;
- per table: files in the current snapshot, files on disk, and the time to load its snapshot
  (what every reader pays, and what grows with small files); the event log's too.

After the run it prints every sample and, for each figure, the growth from the first samples
after ``--warmup`` seconds to the last ones (mean of three each): the targets are < 1.10x for
memory and flat threads, open files and batch durations; file counts bounded by compaction.

    .venv/bin/python -m bench.endurance --minutes 60 --rate 5000 --every 30
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

import lakefeed as lf
from bench.procs import tree_usage
from lakefeed.runtime.event_log import read_events

IOT = Path(__file__).resolve().parents[1] / "examples" / "iot"
TABLES = ("bronze_readings", "silver_readings", "silver_readings_quarantine", "gold_device_5min")
MIB = 1024 * 1024


@dataclass
class Sample:
    at_s: float
    wall: float  # epoch seconds
    driver_mib: float
    jvm_mib: float
    workers_mib: float
    threads: int
    open_files: int
    batches: int
    batch_ms: float | None
    files: dict[str, int] = field(default_factory=dict)  # table -> snapshot files
    disk_files: dict[str, int] = field(default_factory=dict)
    load_ms: dict[str, float] = field(default_factory=dict)


def _table_figures(path: Path) -> tuple[int, int, float] | None:
    """(snapshot files, data files on disk, snapshot load ms) of the Delta table at ``path``."""
    if not (path / "_delta_log").is_dir():
        return None
    started = time.perf_counter()
    table = DeltaTable(str(path))
    files = len(table.file_uris())
    load_ms = (time.perf_counter() - started) * 1000
    disk = sum(1 for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)
    return files, disk, load_ms


class Sampler:
    def __init__(self, spark: SparkSession, lakehouse: Path, every: float) -> None:
        self.spark = spark  # the session is thread-local: this thread has no active one
        self.lakehouse = lakehouse
        self.every = every
        self.samples: list[Sample] = []
        self._seen: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.samples.append(self.sample())
            except Exception as error:  # a sample lost is no reason to stop the run
                print(f"sample failed: {error}", flush=True)

    def _new_batches(self) -> list[float]:
        durations: list[float] = []
        for query in self.spark.streams.active:
            for progress in query.recentProgress:
                key = (str(progress.id), progress.batchId)
                if key not in self._seen and progress.numInputRows:
                    self._seen.add(key)
                    durations.append(float(progress.durationMs.get("triggerExecution", 0)))
        return durations

    def sample(self) -> Sample:
        usage = tree_usage()
        durations = self._new_batches()
        result = Sample(
            at_s=time.monotonic() - self._started,
            wall=time.time(),
            driver_mib=usage.driver.rss_bytes / MIB,
            jvm_mib=usage.jvm.rss_bytes / MIB,
            workers_mib=usage.workers.rss_bytes / MIB,
            threads=usage.driver.threads + usage.jvm.threads + usage.workers.threads,
            open_files=usage.driver.open_files + usage.jvm.open_files + usage.workers.open_files,
            batches=len(durations),
            batch_ms=statistics.median(durations) if durations else None,
        )
        paths = {name: self.lakehouse / "tables" / name for name in TABLES}
        paths["event_log"] = self.lakehouse / "event_log"
        for name, path in paths.items():
            figures = _table_figures(path)
            if figures is not None:
                result.files[name], result.disk_files[name], result.load_ms[name] = figures
        return result


def _growth(values: list[float]) -> str:
    clean = [v for v in values if v is not None]
    if len(clean) < 2:
        return "n/a"
    head, tail = clean[: min(3, len(clean))], clean[-min(3, len(clean)) :]
    start = statistics.mean(head)
    return f"{statistics.mean(tail) / start:.2f}x" if start else "n/a"


def report(samples: list[Sample], warm_from: float, warmup_s: float) -> None:
    """Every sample, then growth over the samples ``warmup_s`` after ``warm_from`` (epoch s)."""
    print(
        f"{'t s':>6}{'driver':>8}{'jvm':>8}{'workers':>8}{'thr':>6}{'fds':>6}"
        f"{'batches':>8}{'p50 ms':>8}  files (snapshot/disk, load ms)"
    )
    for s in samples:
        files = ", ".join(
            f"{n.split('_')[0]}{'_q' if 'quarantine' in n else ''} {s.files[n]}/"
            f"{s.disk_files[n]} {s.load_ms[n]:.0f}"
            for n in s.files
        )
        batch = f"{s.batch_ms:.0f}" if s.batch_ms is not None else "-"
        print(
            f"{s.at_s:>6.0f}{s.driver_mib:>8.0f}{s.jvm_mib:>8.0f}{s.workers_mib:>8.0f}"
            f"{s.threads:>6}{s.open_files:>6}{s.batches:>8}{batch:>8}  {files}"
        )
    warm = [s for s in samples if s.wall >= warm_from + warmup_s]
    if len(warm) < 2:
        print("too few samples after the warm-up for growth ratios")
        return
    print(
        f"growth from {warmup_s:.0f} s after the last flow started "
        "(mean of the last 3 / first 3 samples):"
    )
    figures = {
        "driver RSS": [s.driver_mib for s in warm],
        "JVM RSS": [s.jvm_mib for s in warm],
        "Python workers RSS": [s.workers_mib for s in warm],
        "threads": [s.threads for s in warm],
        "open files": [s.open_files for s in warm],
        "batch duration p50": [s.batch_ms for s in warm],
    }
    for name in warm[-1].files:
        figures[f"{name} snapshot files"] = [s.files.get(name) for s in warm]
        figures[f"{name} snapshot load"] = [s.load_ms.get(name) for s in warm]
    for name, values in figures.items():
        print(f"  {name:<40}{_growth(values):>8}")  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--rate", type=int, default=5000, help="events/s from the generator")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between samples")
    parser.add_argument(
        "--warmup", type=float, help="seconds after the last flow started (default: 1/4 run)"
    )
    parser.add_argument("--trigger", default="5 seconds")
    parser.add_argument("--retention", default="30 minutes", help="lakefeed.eventLog.retention")
    parser.add_argument("--keep", type=Path, help="lakehouse folder to keep (default: temporary)")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="lakefeed-endurance-"))
    lakehouse = root / "lakehouse"
    conf = {
        "iot.rowsPerSecond": str(args.rate),
        "iot.backlogSeconds": "0",
        "lakefeed.eventLog.retention": args.retention,
    }
    spark = lf.spark_session(master="local[2]")
    sampler = Sampler(spark, lakehouse, args.every)
    sampler.start()
    try:
        result = lf.run(
            IOT,
            lakehouse=lakehouse,
            mode="continuous",
            duration=args.minutes * 60,
            trigger_interval=args.trigger,
            conf=conf,
            spark=spark,
        )
        sampler.stop()
        started = read_events(lakehouse / "event_log", event_types=["flow_start"])
        warm_from = max(e["timestamp"].timestamp() for e in started)
    finally:
        sampler.stop()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    written = ", ".join(f"{f.name} {f.rows_written:,}" for f in result.flows)
    print(f"endurance: {args.minutes:g} min at {args.rate} events/s, trigger {args.trigger!r}")
    print(f"run: {result.reason}; rows written: {written}")
    warmup = args.warmup if args.warmup is not None else args.minutes * 15
    report(sampler.samples, warm_from, warmup)
    return 0 if not any(f.error for f in result.flows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
