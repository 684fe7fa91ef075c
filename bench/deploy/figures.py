"""The deployment bench's pure parts: ratios and verdicts, what Spark's tasks spent their time
on (read from Spark's own event log) and which S3 requests a leg made (read from moto's access
log). Spark-free, so they test in milliseconds.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

from tests.support.s3 import access_log


@dataclass(frozen=True)
class Target:
    """A throughput ratio (``other / base``, rows/s) and the least it may be."""

    name: str
    at_least: float
    meaning: str


CLUSTER = Target("cluster / local[2]", 0.85, "cluster at most 15% slower than local[2]")
S3 = Target("S3 / local disk", 0.7, "S3 sink at least 0.7x the local-disk sink")


def ratio(base: Sequence[float], other: Sequence[float]) -> float:
    """Median over median: one slow run on a shared machine does not decide a verdict."""
    if not base or not other:
        return float("nan")
    return statistics.median(other) / statistics.median(base)


def verdict(target: Target, base: Sequence[float], other: Sequence[float]) -> str:
    """One line: the ratio, whether it meets the target, and what the target says."""
    value = ratio(base, other)
    state = "MET" if value >= target.at_least else "MISSED"  # NaN (a failed leg) misses
    return f"{target.name} = {value:.2f}x (target >= {target.at_least}: {state}; {target.meaning})"


def rate_line(label: str, rates: Sequence[float], seconds: Sequence[float]) -> str:
    """A leg's median rows/s and time, with every run's rows/s."""
    if not rates:
        return f"  {label:<30} no successful run"
    runs = ", ".join(f"{r:,.0f}" for r in rates)
    return (
        f"  {label:<30} {statistics.median(rates):>12,.0f} rows/s  "
        f"{statistics.median(seconds):7.2f} s  (runs: {runs})"
    )


@dataclass
class TaskTimes:
    """Spark's task metrics summed over an application (milliseconds, bytes).

    ``scheduler_ms`` is what the Spark UI calls scheduler delay: a task's wall time minus what
    the executor accounts for (deserializing the task, running it, serializing its result,
    the driver fetching the result), i.e. launching it and shipping it across processes.
    ``deserialize_cpu_ms`` is the CPU part of deserializing: the rest is waiting (an executor
    fetching the stage's task binary from the driver, a new JVM loading classes and jars).
    """

    tasks: int = 0
    wall_ms: int = 0
    run_ms: int = 0
    deserialize_ms: int = 0
    deserialize_cpu_ms: float = 0.0
    result_ms: int = 0
    scheduler_ms: int = 0
    gc_ms: int = 0
    fetch_wait_ms: int = 0
    remote_shuffle_bytes: int = 0
    executors: set[str] = field(default_factory=set)

    def add(self, event: dict) -> None:
        info, metrics = event["Task Info"], event.get("Task Metrics") or {}
        wall = int(info["Finish Time"]) - int(info["Launch Time"])
        run = int(metrics.get("Executor Run Time", 0))
        deserialize = int(metrics.get("Executor Deserialize Time", 0))
        result = int(metrics.get("Result Serialization Time", 0))
        fetched = int(info.get("Getting Result Time", 0))
        shuffle = metrics.get("Shuffle Read Metrics") or {}
        self.tasks += 1
        self.wall_ms += wall
        self.run_ms += run
        self.deserialize_ms += deserialize
        self.deserialize_cpu_ms += int(metrics.get("Executor Deserialize CPU Time", 0)) / 1e6
        self.result_ms += result + fetched
        self.scheduler_ms += max(0, wall - run - deserialize - result - fetched)
        self.gc_ms += int(metrics.get("JVM GC Time", 0))
        self.fetch_wait_ms += int(shuffle.get("Fetch Wait Time", 0))
        self.remote_shuffle_bytes += int(shuffle.get("Remote Bytes Read", 0))
        self.executors.add(str(info.get("Executor ID")))

    def line(self, label: str) -> str:
        if not self.tasks:
            return f"  {label:<16} no task metrics (Spark event log missing)"
        per = self.tasks
        return (
            f"  {label:<16} {self.tasks:>6} tasks, {len(self.executors)} executor(s); per task ms:"
            f" wall {self.wall_ms / per:6.1f}  run {self.run_ms / per:6.1f}"
            f"  scheduler delay {self.scheduler_ms / per:5.1f}"
            f"  deserialize {self.deserialize_ms / per:5.1f}"
            f" (CPU {self.deserialize_cpu_ms / per:4.1f})"
            f"  result {self.result_ms / per:5.1f}"
            f"  GC {self.gc_ms / per:5.1f}  shuffle wait {self.fetch_wait_ms / per:5.1f};"
            f"  remote shuffle {self.remote_shuffle_bytes / 2**10:,.0f} KiB"
        )


def task_times(lines: Iterable[str]) -> TaskTimes:
    """Sum the successful tasks of a Spark event log (one JSON event a line)."""
    times = TaskTimes()
    for _query, event in _successful_tasks(lines):
        times.add(event)
    return times


def query_task_times(lines: Iterable[str], labels: Mapping[str, str]) -> dict[str, TaskTimes]:
    """The successful tasks of the streaming queries ``labels`` names (query id -> label), per
    label: a leg's measured runs apart from its warm-up and lakefeed's executor check, whose
    tasks pay a new executor JVM's class loading and jar fetches."""
    found: dict[str, TaskTimes] = {label: TaskTimes() for label in labels.values()}
    for query, event in _successful_tasks(lines):
        if query in labels:
            found[labels[query]].add(event)
    return found


def _successful_tasks(lines: Iterable[str]) -> Iterator[tuple[str | None, dict]]:
    """(streaming query id or None, task end event) of each successful task; a job's stages
    belong to the query in its properties (``sql.streaming.queryId``)."""
    query_of_stage: dict[int, str | None] = {}
    for line in lines:
        if '"SparkListenerJobStart"' in line:
            job = json.loads(line)
            query = (job.get("Properties") or {}).get("sql.streaming.queryId")
            query_of_stage.update({stage: query for stage in job.get("Stage IDs", [])})
        elif '"SparkListenerTaskEnd"' in line:
            event = json.loads(line)
            if (event.get("Task End Reason") or {}).get("Reason") == "Success":
                yield query_of_stage.get(event.get("Stage ID", -1)), event


def event_log_lines(folder: Path) -> list[str]:
    """Every application's event log in ``folder`` (``spark.eventLog.dir``)."""
    lines: list[str] = []
    for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if path.is_file():
            lines.extend(path.read_text(errors="replace").splitlines())
    return lines


def read_task_times(folder: Path) -> TaskTimes:
    """Every application's event log in ``folder``, summed."""
    return task_times(event_log_lines(folder))


_PYTHON_TIMES = re.compile(r"PythonRunner: Times: total = (\d+), boot = (\d+), init = (\d+)")


def python_worker_times(lines: Iterable[str]) -> tuple[int, int, int]:
    """(Python tasks, ms starting their workers, ms initialising them) from an executor's log:
    Spark's ``PythonRunner`` logs ``Times: total = …, boot = …, init = …`` per Python task."""
    tasks = boot = init = 0
    for line in lines:
        found = _PYTHON_TIMES.search(line)
        if found:
            tasks, boot, init = tasks + 1, boot + int(found[2]), init + int(found[3])
    return tasks, boot, init


_LEG = re.compile(r"/(?P<fmt>parquet|delta|delta-py)-(?:out|cp)-(?P<attempt>\d+)(?:/|$|\?)")
WARMUP_ATTEMPT = "99"  # bench/delta_bench.py's warm-up runs write to *-out-99 / *-cp-99


def s3_part(path: str) -> str:
    """Which kind of object a request touched, from its key."""
    if "/_delta_log" in path:
        return "Delta log"
    if "/_spark_metadata" in path:
        return "parquet sink log"
    if "-cp-" in path:
        return "Spark checkpoint"
    if "/_lakefeed_staging" in path or "/_temporary" in path:
        return "staging"
    if path.endswith(".parquet") or ".parquet?" in path:
        return "data files"
    return "other"


def s3_method(method: str, target: str) -> str:
    """The S3 operation: a bucket GET with a prefix or ``list-type`` is a listing. (A copy, as
    S3A's rename does, is a PUT with a header the access log does not show: it counts as PUT.)"""
    query = target.partition("?")[2]
    if method == "GET" and ("list-type=" in query or "prefix=" in query or "delimiter=" in query):
        return "LIST"
    return method


@dataclass
class S3Requests:
    """Requests per (leg format, object kind, operation), warm-up runs left out."""

    counts: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    attempts: dict[str, set[str]] = field(default_factory=dict)

    def per_run(self, fmt: str) -> dict[tuple[str, str], float]:
        runs = max(len(self.attempts.get(fmt, ())), 1)
        return {(part, op): n / runs for (f, part, op), n in self.counts.items() if f == fmt}

    def lines(self, fmt: str, batches: int) -> list[str]:
        """The table of one format's requests per run and per micro-batch, largest first."""
        rows = sorted(self.per_run(fmt).items(), key=lambda kv: -kv[1])
        total = sum(n for _, n in rows)
        out = [f"  {fmt}: {total:,.0f} requests per run, {total / max(batches, 1):,.1f} per batch"]
        out += [f"    {part:<17} {op:<6} {n:8,.1f}" for (part, op), n in rows]
        return out


def _object(target: str) -> str:
    """The key a request is about: its path, and for a listing the prefix listed."""
    path, _, query = target.partition("?")
    prefix = parse_qs(query).get("prefix", [""])[0]
    return f"{path.rstrip('/')}/{prefix}" if prefix else path


def s3_requests(lines: Iterable[str]) -> S3Requests:
    """Classify moto's access-log lines (:func:`tests.support.s3.access_log`). A run is one
    attempt folder of one repeat (``run-1/delta-out-0``): repeats reuse attempt numbers."""
    found = S3Requests()
    for method, target, _status in access_log(lines):
        path = _object(target)
        leg = _LEG.search(path)
        if leg is None or leg["attempt"] == WARMUP_ATTEMPT:
            continue
        key = (leg["fmt"], s3_part(path), s3_method(method, target))
        found.counts[key] += 1
        found.attempts.setdefault(leg["fmt"], set()).add(f"{path[: leg.start()]}/{leg['attempt']}")
    return found
