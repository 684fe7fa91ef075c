"""Where a latency micro-batch's time goes: fixed-size batches, CPU per process, per phase.

Wall-clock latency on a shared 2-core machine says little (load 5-30); CPU time does. This
script pre-fills a topic with YSB events, then runs the latency query (Kafka → parse → filter →
join campaign) in one session as several variants, each a streaming query of
``maxOffsetsPerTrigger`` events per batch, back to back (``0 seconds``):

- ``delta``: into a Delta table (lakefeed's stream sink), as the latency pipeline does;
- ``noop``: the same query into Spark's ``noop`` sink (the sink's share = delta − noop);
- ``batch``: the same query through ``foreachBatch`` into ``noop`` (what ``foreachBatch`` itself
  costs = batch − noop: Spark 4.3 hands the body the batch's already planned RDD, it does not
  plan the query again; the Delta write's own share = delta − batch);
- ``src``: only the Kafka value into ``noop`` (the source's share).

For the batches after the third it prints the median ``durationMs`` per phase and the CPU
milliseconds per batch of each kind of process (driver Python, JVM, Python workers, the
streaming source runner, the broker). Extra ``spark.key=value`` arguments go to the session,
so a setting is compared by running the script twice.

    python -m bench.latency.profile --events 5000 --batches 12 [spark.key=value ...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.latency.measure import PHASES
from bench.latency.run import _templates
from bench.ysb import broker, query
from bench.ysb import events as ev
from bench.ysb.harness import ROOT, load_average

VARIANTS = ("delta", "noop", "batch", "src")
SKIPPED = 3
"""Batches not measured: the first ones compile code and open clients."""


def cpu_by_kind() -> dict[str, float]:
    """CPU seconds (user + system) so far of this process and its descendants, by kind."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        procs[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick, cmd)
    totals: dict[str, float] = {}
    for pid, (_, seconds, cmd) in procs.items():
        if _descends(pid, procs):
            kind = _kind(pid, cmd)
            totals[kind] = totals.get(kind, 0.0) + seconds
    return totals


def _descends(pid: int, procs: dict[int, tuple[int, float, str]]) -> bool:
    while pid in procs:
        if pid == os.getpid():
            return True
        pid = procs[pid][0]
    return False


def _kind(pid: int, cmd: str) -> str:
    if pid == os.getpid():
        return "driver"
    for marker, kind in (
        ("java", "jvm"),
        ("streaming_source_runner", "source_runner"),
        ("tansu", "broker"),
        ("pyspark", "py_workers"),
    ):
        if marker in cmd:
            return kind
    return "other"


def _fill(bootstrap: str, events: int, templates: list[tuple[str, str, bool]]) -> None:
    producer: Any = broker.producer(bootstrap, **{"linger.ms": 2})
    now = int(time.time() * 1000)
    for i in range(events):
        before, after, _ = templates[i % len(templates)]
        while True:
            try:
                producer.produce("events", f"{before}{now}{after}".encode())
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(60)


def _frame(spark: SparkSession, variant: str, bootstrap: str, per: int, out: Path) -> DataFrame:
    raw = (
        spark.readStream.format("lakefeed_kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per))
        .load()
    )
    if variant == "src":
        return raw.select("value")
    events = raw.select(*query.parse_value(F.col("value")))
    return query.views(events, query.campaigns_frame(spark, str(out / "campaigns.json")))


def _measure(spark: SparkSession, variant: str, name: str, args: argparse.Namespace) -> str:
    from lakefeed.connectors import delta

    frame = _frame(spark, variant, args.bootstrap, args.events, args.out)
    checkpoint, trigger = str(args.out / f"checkpoint-{name}"), {"processingTime": "0 seconds"}
    if variant == "delta":
        query_ = delta.write_stream(frame, str(args.out / f"table-{name}"), checkpoint,
                                    trigger=trigger)  # fmt: skip
    elif variant == "batch":
        query_ = (frame.writeStream.foreachBatch(_noop_batch)
                  .option("checkpointLocation", checkpoint).trigger(**trigger).start())  # fmt: skip
    else:
        query_ = (frame.writeStream.format("noop").option("checkpointLocation", checkpoint)
                  .trigger(**trigger).start())  # fmt: skip
    _until_batch(query_, SKIPPED)
    first, before = query_.lastProgress["batchId"], cpu_by_kind()
    _until_batch(query_, SKIPPED + args.batches)
    after, batches = cpu_by_kind(), query_.lastProgress["batchId"] - first
    query_.stop()
    timed = [p for p in query_.recentProgress if p["numInputRows"] and p["batchId"] > first]
    phases = {k: statistics.median(p["durationMs"].get(k, 0) for p in timed)
              for k in ("triggerExecution", *PHASES)}  # fmt: skip
    cpu = {k: 1000 * (after[k] - before.get(k, 0.0)) / batches for k in sorted(after)}
    return (
        f"{name:10} {len(timed)} batches, median ms: "
        + " ".join(f"{k} {v:.0f}" for k, v in phases.items() if k != "getBatch")
        + "\n           CPU ms per batch: "
        + " ".join(f"{k} {v:.0f}" for k, v in cpu.items())
        + f"  (load {load_average():.1f})"
    )


def _noop_batch(frame: DataFrame, _batch_id: int) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _until_batch(query_: Any, batch_id: int) -> None:
    while query_.lastProgress is None or query_.lastProgress["batchId"] < batch_id:
        if query_.exception() is not None:
            raise RuntimeError(str(query_.exception()))
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    from lakefeed.session import spark_session

    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    campaigns = ev.Campaigns.generate(7)
    campaigns.write_json(args.out / "campaigns.json")
    variants = args.variants.split(",")
    total = args.events * (SKIPPED + args.batches + 3) * len(variants) * args.repeats
    conf = dict(kv.split("=", 1) for kv in args.conf)
    with broker.tansu(args.out / "tansu.log") as args.bootstrap:
        broker.create_topic(args.bootstrap, "events", args.partitions)
        _fill(args.bootstrap, total, _templates(campaigns))
        spark = spark_session("latency-profile", master=f"local[{args.cores}]",
                              conf={"spark.ui.enabled": "false", **conf})  # fmt: skip
        print(f"{args.events:,} events per batch; conf {conf or 'lakefeed defaults'}", flush=True)
        for repeat in range(1, args.repeats + 1):
            for variant in variants:
                print(_measure(spark, variant, f"{variant}-{repeat}", args), flush=True)
        spark.stop()
    return 0


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=5000, help="events per micro-batch")
    p.add_argument("--batches", type=int, default=12, help="measured batches per variant")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "latency-profile")
    p.add_argument("conf", nargs="*", help="spark.key=value for the session")
    return p.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(main())
