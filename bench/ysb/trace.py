"""Where a YSB micro-batch's time goes: lakefeed's pieces swapped one at a time, in one process.

The YSB legs differ in four places at once: the source (lakefeed's planned ``cloudFiles`` vs
Spark's file source), the sink (lakefeed's Delta sink, a ``foreachBatch`` that stages Spark's
Parquet files and commits them through delta-rs, vs Spark's parquet sink), the state store
(lakefeed's session default RocksDB with changelog checkpointing vs Spark's default
HDFS-backed store) and the runner around the query. Each variant here changes one of them from
the plain PySpark job, all in the same warmed-up session and rotating order, so their ratios
are comparable even on a loaded machine. Per variant it reports the job time, Spark's per-phase
batch times (``durationMs``) and the Spark jobs/stages/tasks each batch ran (from the
session's status REST API), with ``--profile`` the driver's Python time inside the planned
source's callbacks (cProfile, top functions), and with ``--calls`` the Py4J calls the driver's
Python makes into the JVM per run, by who makes them (each a round trip; load moves times, not
these counts). The ``-kept`` variants run cloudFiles as it was
before Spark's file metadata was pruned from scans that do not use it (the rule left out with
``spark.sql.optimizer.excludedRules``): an A/B of that fix in one process.

    PYTHONPATH=. .venv/bin/python -m bench.ysb.trace --events 500000 --repeats 3
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.ysb import events as ev
from bench.ysb import query
from bench.ysb.harness import ROOT, fresh_dir, load_average, machine
from bench.ysb.run import CAMPAIGNS, prepare_files

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STATE_STORE = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
PIPELINE = ROOT / "bench" / "ysb" / "pipeline.py"
KEEP_METADATA = {"spark.sql.optimizer.excludedRules": "dev.lakefeed.spark.PruneUnusedFileMetadata"}
"""cloudFiles as before 2026-11-26: Spark's file metadata in the scan though the flow drops it."""


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spec = ev.EventSpec(args.events)
    gen = ev.Generator(spec, ev.Campaigns.generate(spec.seed))
    inputs = prepare_files(gen, args.out / "input", args.files)
    os.environ.update(
        YSB_INPUT=str(inputs / "events"),
        YSB_CAMPAIGNS=str(inputs / CAMPAIGNS),
        YSB_MAX_FILES=str(args.max_files),
    )
    from lakefeed.session import spark_session

    spark = spark_session(
        "ysb-trace",
        master=f"local[{args.cores}]",
        conf={"spark.ui.enabled": "true", "spark.ui.port": "0", "spark.driver.memory": "2g"},
    )
    variants = [VARIANTS[name] for name in args.variants.split(",")]
    print(f"YSB trace: {spec.events:,} events, {args.files} files; {machine()}", flush=True)
    for variant in variants:  # warm-up: JIT, Python workers, first use of every reader
        variant.run(spark, args, fresh_dir(args.out / "work" / f"warmup-{variant.name}"))
    results: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
    profiles = {v.name: cProfile.Profile() for v in variants} if args.profile else {}
    for repeat in range(args.repeats):
        for variant in variants[repeat % len(variants) :] + variants[: repeat % len(variants)]:
            work = fresh_dir(args.out / "work" / f"{variant.name}-{repeat}")
            cpu = _cpu_seconds(spark)
            calls: Counter[str] = Counter()
            with _profiling(profiles.get(variant.name)), _counting(calls if args.calls else None):
                figures = variant.run(spark, args, work)
            if args.calls:
                figures["py4j_calls"] = dict(calls.most_common())
            figures["cpu_s"] = {k: round(v - cpu[k], 2) for k, v in _cpu_seconds(spark).items()}
            figures["jobs"] = _jobs(spark, figures.pop("run_ids"))
            figures["load"] = load_average()
            results[variant.name].append(figures)
            print(f"  #{repeat} {variant.name:14} {_line(figures)}", flush=True)
    spark.stop()
    (args.out / "trace.json").write_text(json.dumps(results, indent=2, default=str))
    _report(results, args)
    for name, profile in profiles.items():
        _print_profile(name, profile, args.profile_lines)
    return 0


class Variant:
    """One way of running the YSB query, in ``work``; ``run`` returns its figures."""

    def __init__(self, name: str, run: Callable[[Any, argparse.Namespace, Path], dict]) -> None:
        self.name = name
        self.run = run


def _plain_events(spark: Any, args: argparse.Namespace, work: Path) -> Any:
    return (
        spark.readStream.schema(query.EVENT_SCHEMA)
        .option("maxFilesPerTrigger", args.max_files)
        .json(os.environ["YSB_INPUT"])
    )


def _cloudfiles_events(spark: Any, args: argparse.Namespace, work: Path) -> Any:
    """The pipeline's source (``bench/ysb/sources.py``) outside a pipeline: ``read_files``
    with the schema given, so ``_metadata`` is there as for a user, then dropped by the
    ``select`` (``read_stream``'s fixed schema would have no ``_metadata`` at all)."""
    from lakefeed.connectors.files import read_files

    frame = read_files(
        os.environ["YSB_INPUT"],
        format="json",
        schema=query.EVENT_SCHEMA,
        **{
            "cloudFiles.maxFilesPerTrigger": str(args.max_files),
            "cloudFiles.schemaLocation": str(work / "schema"),
        },
    )
    return frame.select(*query.EVENT_FIELDS)


def _query(spark: Any, events: Any) -> Any:
    campaigns = query.campaigns_frame(spark, os.environ["YSB_CAMPAIGNS"])
    return query.window_counts(events, campaigns)


def _stream(
    source: Callable[[Any, argparse.Namespace, Path], Any],
    sink: str,
    state_store: str,
    conf: dict[str, str] | None = None,
) -> Callable[[Any, argparse.Namespace, Path], dict]:
    """A hand-written query: ``source`` → the YSB query → ``sink`` (``parquet`` or lakefeed's
    ``delta``), with ``state_store`` for the window counts and session settings ``conf``."""

    def run(spark: Any, args: argparse.Namespace, work: Path) -> dict:
        from lakefeed.runtime.query_start import session_conf

        with session_conf(spark, {STATE_STORE: state_store, **(conf or {})}):
            started = time.perf_counter()
            counts = _query(spark, source(spark, args, work))
            stream = (
                counts.writeStream.format(sink)
                .outputMode("append")
                .option("checkpointLocation", str(work / "checkpoint"))
                .trigger(availableNow=True)
                .start(str(work / "output"))
            )
            stream.awaitTermination()
            elapsed = time.perf_counter() - started
        progress = [json.loads(p.json) for p in stream.recentProgress]
        return _figures(elapsed, progress)

    return run


def _pipeline(
    state_store: str, conf: dict[str, str] | None = None
) -> Callable[[Any, argparse.Namespace, Path], dict]:
    """The benchmark's lakefeed pipeline run as ``lakefeed run --mode available-now`` does,
    with session settings ``conf``."""

    def run(spark: Any, args: argparse.Namespace, work: Path) -> dict:
        from lakefeed.core.lakehouse import Lakehouse
        from lakefeed.pipeline.loader import load_pipeline
        from lakefeed.runtime.event_log import read_events
        from lakefeed.runtime.query_start import session_conf
        from lakefeed.runtime.runner import RunOptions, run_pipeline

        with session_conf(spark, {STATE_STORE: state_store, **(conf or {})}):
            loaded = load_pipeline([PIPELINE], spark=spark)
            started = time.perf_counter()
            result = run_pipeline(
                loaded, Lakehouse.at(work), spark, RunOptions(mode="available-now")
            )
            elapsed = time.perf_counter() - started
        if not result.ok:
            raise SystemExit(f"lakefeed run failed: {result.failed} ({result.reason})")
        events = read_events(work / "event_log")
        progress = [e["details"] for e in events if e["event_type"] == "flow_progress"]
        return _figures(elapsed, [p for p in progress if p])

    return run


VARIANTS = {
    v.name: v
    for v in (
        Variant("pyspark", _stream(_plain_events, "parquet", HDFS)),
        Variant("pyspark+rocks", _stream(_plain_events, "parquet", ROCKSDB)),
        Variant("cloudfiles", _stream(_cloudfiles_events, "parquet", HDFS)),
        Variant("cloudfiles-kept", _stream(_cloudfiles_events, "parquet", HDFS, KEEP_METADATA)),
        Variant("delta-sink", _stream(_plain_events, "delta", HDFS)),
        Variant("lakefeed+hdfs", _pipeline(HDFS)),
        Variant("lakefeed", _pipeline(ROCKSDB)),
        Variant("lakefeed-kept", _pipeline(ROCKSDB, KEEP_METADATA)),
    )
}


def _figures(elapsed: float, progress: list[dict]) -> dict[str, Any]:
    from bench.ysb.protocol import sum_durations

    return {
        "elapsed_s": elapsed,
        "batches": len(progress),
        "durations_ms": sum_durations(progress),
        "state_ms": _state_times(progress),
        "run_ids": sorted({p["runId"] for p in progress}),
    }


def _state_times(progress: list[dict]) -> dict[str, int]:
    """The state store's own times, summed over batches and operators: updates, removals,
    commit, and the RocksDB store's latencies (``customMetrics`` ``rocksdb*Latency``)."""
    total: Counter[str] = Counter()
    for p in progress:
        for op in p.get("stateOperators") or []:
            for key in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"):
                total[key] += int(op.get(key) or 0)
            for key, value in (op.get("customMetrics") or {}).items():
                if key.endswith("Latency") or key.endswith("TimeMs"):
                    total[key] += int(value or 0)
    return dict(total)


def _cpu_seconds(spark: Any) -> dict[str, float]:
    """CPU seconds used so far by the driver JVM (every Spark thread: local mode runs the tasks
    there) and by this Python process (the planned source's and the Delta sink's callbacks):
    unlike wall time, hardly moved by other work on the machine."""
    with open(f"/proc/{spark.sparkContext._gateway.proc.pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    mine = os.times()
    return {
        "jvm": (int(fields[11]) + int(fields[12])) / tick,
        "python": mine.user + mine.system,
    }


def _jobs(spark: Any, run_ids: list[str]) -> dict[str, Any]:
    """Spark jobs the query ran (its job group is its run id): how many, their stages and
    tasks, summed job time, and which call sites they came from."""
    sc = spark.sparkContext
    url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    jobs = [j for j in _get(f"{url}/jobs") if j.get("jobGroup") in run_ids]
    stages = sum(len(j["stageIds"]) - j.get("numSkippedStages", 0) for j in jobs)
    return {
        "jobs": len(jobs),
        "stages": stages,
        "tasks": sum(j["numTasks"] - j.get("numSkippedTasks", 0) for j in jobs),
        "job_s": round(sum(_job_seconds(j) for j in jobs), 3),
        "by_call_site": dict(Counter(j["name"].split(" at ")[0] for j in jobs)),
    }


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def _job_seconds(job: dict[str, Any]) -> float:
    from datetime import datetime

    def at(text: str) -> float:
        return datetime.strptime(text.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()

    if "completionTime" not in job:
        return 0.0
    return at(job["completionTime"]) - at(job["submissionTime"])


@contextmanager
def _profiling(profile: cProfile.Profile | None) -> Iterator[None]:
    """Profile lakefeed's driver-side per-batch Python into ``profile``: the planned source's
    callbacks and the Delta sink's ``foreachBatch`` body. Both run in Py4J's callback threads,
    which a profiler enabled in this thread does not see, so each call is profiled itself."""
    if profile is None:
        yield
        return
    from lakefeed.delta.spark_write import SparkFilesSink
    from lakefeed.spark.jvm.bridge import Planner

    targets = [(Planner, name) for name in ("latestOffset", "batch", "commit")]
    targets.append((SparkFilesSink, "__call__"))
    originals = [(cls, name, getattr(cls, name)) for cls, name in targets]

    def wrap(original: Callable) -> Callable:
        def profiled(self: Any, *a: Any) -> Any:
            return profile.runcall(original, self, *a)

        return profiled

    for cls, name, original in originals:
        setattr(cls, name, wrap(original))
    try:
        yield
    finally:
        for cls, name, original in originals:
            setattr(cls, name, original)


@contextmanager
def _counting(calls: Counter[str] | None) -> Iterator[None]:
    """Count into ``calls`` the commands this process sends the driver JVM over Py4J, by sender:
    the planned source's callbacks, the Delta sink's ``foreachBatch`` body, the progress
    listener (lakefeed's, or pyspark's field-by-field one), py4j's collection of dropped proxies
    (``FinalizerWorker``) and the rest (the runner's thread: validation, start, waiting)."""
    if calls is None:
        yield
        return
    from py4j.clientserver import ClientServerConnection
    from pyspark.sql.streaming.listener import JStreamingQueryListener

    from lakefeed.delta.spark_write import SparkFilesSink
    from lakefeed.runtime import listener
    from lakefeed.spark.jvm.bridge import Planner

    local = threading.local()
    send = ClientServerConnection.send_command
    senders = [(Planner, n, "planner") for n in ("latestOffset", "batch", "commit")]
    senders += [
        (SparkFilesSink, "__call__", "delta sink"),
        (JStreamingQueryListener, "onQueryProgress", "listener"),
        (listener._FromJson, "onQueryProgress", "listener"),
    ]
    originals = [(cls, name, getattr(cls, name)) for cls, name, _ in senders]

    def counted(self: Any, command: str) -> Any:
        thread = threading.current_thread()
        who = "py4j gc" if type(thread).__name__ == "FinalizerWorker" else "runner"
        calls[getattr(local, "who", None) or who] += 1
        return send(self, command)

    def labelled(original: Callable, who: str) -> Callable:
        def call(self: Any, *a: Any) -> Any:
            local.who = who
            try:
                return original(self, *a)
            finally:
                local.who = None

        return call

    ClientServerConnection.send_command = counted  # type: ignore[method-assign]
    for (cls, name, who), (_, _, original) in zip(senders, originals, strict=True):
        setattr(cls, name, labelled(original, who))
    try:
        yield
    finally:
        ClientServerConnection.send_command = send  # type: ignore[method-assign]
        for cls, name, original in originals:
            setattr(cls, name, original)


def _line(f: dict[str, Any]) -> str:
    d, j, cpu = f["durations_ms"], f["jobs"], f["cpu_s"]
    return (
        f"job {f['elapsed_s']:5.2f} s  cpu jvm {cpu['jvm']:5.2f} py {cpu['python']:4.2f}  "
        f"batches {f['batches']}  trigger "
        f"{d.get('triggerExecution', 0) / 1000:5.2f} s  addBatch {d.get('addBatch', 0) / 1000:5.2f}"
        f"  getBatch {d.get('getBatch', 0) / 1000:4.2f}  jobs {j['jobs']} stages {j['stages']} "
        f"tasks {j['tasks']} ({j['job_s']:.2f} s)  load {f['load']:.1f}"
        + (f"\n      py4j calls {f['py4j_calls']}" if "py4j_calls" in f else "")
    )


def _report(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    plain = [r["elapsed_s"] for r in results.get("pyspark", [])]
    base = statistics.median(plain) if plain else None
    print(f"\nmedians over {args.repeats} repeats (phases summed over a run's batches, seconds):")
    for name, runs in results.items():
        elapsed = statistics.median(r["elapsed_s"] for r in runs)
        cpu = {k: statistics.median(r["cpu_s"][k] for r in runs) for k in ("jvm", "python")}
        phases: dict[str, float] = {}
        for phase in (
            "triggerExecution",
            "addBatch",
            "getBatch",
            "latestOffset",
            "queryPlanning",
            "walCommit",
            "commitOffsets",
        ):
            phases[phase] = statistics.median(r["durations_ms"].get(phase, 0) for r in runs) / 1000
        ratio = f"  {base / elapsed:.2f}x pyspark" if base else ""
        print(
            f"  {name:14} job {elapsed:5.2f} s{ratio}  cpu jvm {cpu['jvm']:.2f} s, "
            f"python {cpu['python']:.2f} s  " + "  ".join(f"{k} {v:.2f}" for k, v in phases.items())
        )
        keys = runs[0]["state_ms"]
        state = {k: statistics.median(r["state_ms"].get(k, 0) for r in runs) for k in keys}
        print(
            f"  {'':14} jobs/run {runs[0]['jobs']['by_call_site']}; state store ms "
            + ", ".join(f"{k} {v:.0f}" for k, v in state.items() if v)
        )


def _print_profile(variant: str, profile: cProfile.Profile, lines: int) -> None:
    if not profile.getstats():  # the variant runs none of lakefeed's callbacks
        return
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(lines)
    print(f"\n{variant}: lakefeed's per-batch driver Python, all repeats (cProfile, cumulative):")
    print(out.getvalue())


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=500_000)
    p.add_argument("--files", type=int, default=40)
    p.add_argument("--max-files", type=int, default=8)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list of {list(VARIANTS)}")
    p.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the planned source's callbacks and the Delta sink's foreachBatch body",
    )
    p.add_argument("--profile-lines", type=int, default=30)
    p.add_argument(
        "--calls",
        action="store_true",
        help="count the driver Python's Py4J calls per run, by sender",
    )
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "ysb-trace")
    return p.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
