"""Delta connector benchmark: lakefeed's Delta sink/source vs Spark's native parquet ones.

One process, one SparkSession, the same generated rows for every leg:
  sink:   readStream.parquet(input) -> writeStream.parquet   vs  -> writeStream.format("delta")
  source: readStream.parquet(<the Delta table's own files>) -> noop
          vs readStream.format("delta")(<that table>) -> noop
Every sink and source leg is a streaming query with trigger(availableNow=True) and the same
maxFilesPerTrigger.
Prints rows/s per leg (best of --repeats) and the ratios (targets: sink >= 0.9x, source >= 0.8x).

lakefeed's Delta sink lets Spark's own Parquet writer produce the data files (foreachBatch);
the delta-py-sink leg is its Python Data Source sink (option lakefeed.writer=python), used when
the Spark writer cannot lay the files out. Likewise the delta-src leg plans its batches in
Python and lets Spark's Parquet reader read them (lakefeed.spark.jvm); delta-py-src is the Python
Data Source reader (option lakefeed.reader=python). The *-write legs are batch writes of the
same rows (df.write.parquet vs df.write.format("delta"), Spark-written and Python-written),
the *-read legs batch reads of the table into noop (Spark's reader and the Python one): no
target.
Two ceiling legs show what Spark's Python Data Source API itself costs, with no Delta work:
  pyds-sink: a Python stream writer that only counts the Arrow batches Spark hands it;
  pyds-src:  a Python stream reader that only yields pyarrow's batches of the same files.
Any Python connector pays these hand-overs; the native parquet legs never do.

    .venv/bin/python -m bench.delta_bench --rows 4000000 --files 40 --repeats 3

``--legs`` runs a subset, ``--sink-root`` puts the sink legs' tables and checkpoints elsewhere
(e.g. ``s3://bucket/prefix``), ``--master``/``--spark-conf`` choose the Spark it runs on; the
figures also go out as one ``BENCH-RESULT`` line (:mod:`bench.ysb.protocol`) for
``bench/deploy_bench.py``. The command above writes the performance page's four Delta rows
(bench/results/delta_*.json; see bench/results.py).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit
from pyspark.sql.types import StructType

from bench.results import Run, add_option, count
from bench.ysb import protocol

SINK_LEGS = ("pq-sink", "delta-sink", "delta-py-sink", "pyds-sink")
OTHER_LEGS = (
    "pq-src",
    "delta-src",
    "delta-py-src",
    "pyds-src",
    "pq-read",
    "delta-read",
    "delta-py-read",
    "pq-write",
    "delta-write",
    "delta-py-write",
)


def generate(folder: Path, rows: int, files: int) -> pa.Schema:
    """IoT-like rows: ids, a device string, a timestamp, two doubles, a status string."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(7)
    per_file = rows // files
    schema = None
    for index in range(files):
        start = index * per_file
        ids = np.arange(start, start + per_file, dtype=np.int64)
        table = pa.table(
            {
                "id": ids,
                "device": pa.array([f"dev-{i % 1000:04d}" for i in ids]),
                "ts": pa.array((1_700_000_000_000_000 + ids * 1000).astype("datetime64[us]")).cast(
                    pa.timestamp("us", "UTC")
                ),
                "temperature": rng.normal(20, 5, per_file),
                "humidity": rng.uniform(0, 100, per_file),
                "status": pa.array(np.where(ids % 97 == 0, "alert", "ok")),
            }
        )
        pq.write_table(table, folder / f"part-{index:05d}.parquet")
        schema = table.schema
    assert schema is not None
    return schema


class _CountingWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list, batchId: int) -> None:
        pass


class _FileReader(DataSourceStreamReader):
    def __init__(self, files: list[str], per_batch: int) -> None:
        self.files, self.per_batch = files, per_batch

    def initialOffset(self) -> dict:
        return {"file": 0}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"file": min(start["file"] + self.per_batch, len(self.files))}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(f) for f in self.files[start["file"] : end["file"]]]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from pq.ParquetFile(partition.value).iter_batches(batch_size=1 << 17)


class PythonApiCeiling(DataSource):
    """The ceiling legs' data source: Spark's Python Data Source API with no Delta work."""

    @classmethod
    def name(cls) -> str:
        return "pyds_ceiling"

    def schema(self) -> str:
        return self.options["ddl"]

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return _CountingWriter()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        files = sorted(str(p) for p in Path(self.options["path"]).glob("*.parquet"))
        return _FileReader(files, int(self.options["maxFilesPerTrigger"]))


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--max-files-per-trigger", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--legs", default=",".join(SINK_LEGS + OTHER_LEGS))
    parser.add_argument(
        "--sink-root", default=None, help="where the sink legs write (default: a temp folder)"
    )
    parser.add_argument("--spark-conf", action="append", default=[], help="spark.key=value")
    add_option(parser)
    args = parser.parse_args()
    run = Run.begin(parser, [name for name, *_ in PAGE_ROWS], sys.argv[1:])
    selected = [leg for leg in args.legs.split(",") if leg]
    unknown = set(selected) - set(SINK_LEGS + OTHER_LEGS)
    if unknown:
        parser.error(f"unknown legs {sorted(unknown)}; choose from {SINK_LEGS + OTHER_LEGS}")

    from pyspark.sql.pandas.types import from_arrow_schema

    from lakefeed.core import storage
    from lakefeed.session import spark_session
    from lakefeed.spark.cluster import parse_spark_conf

    work = Path(tempfile.mkdtemp(prefix="delta-bench-"))
    sink_root = args.sink_root or str(work)
    try:
        arrow_schema = generate(work / "input", args.rows, args.files)
        session_started = time.perf_counter()
        spark = spark_session(
            "delta-bench",
            master=args.master,
            conf={"spark.ui.enabled": "false", **parse_spark_conf(args.spark_conf)},
            storage=[sink_root],
        )
        session_s = time.perf_counter() - session_started
        spark.sparkContext.setLogLevel("ERROR")
        schema = from_arrow_schema(arrow_schema)
        limit = str(args.max_files_per_trigger)

        def stream_input():
            return (
                spark.readStream.schema(schema)
                .option("maxFilesPerTrigger", limit)
                .parquet(str(work / "input"))
            )

        progress: dict[str, list[dict]] = {}

        def sink(fmt: str, attempt: int) -> Callable[[], None]:
            def run() -> None:
                out = storage.join(sink_root, f"{fmt}-out-{attempt}")
                cp = storage.join(sink_root, f"{fmt}-cp-{attempt}")
                python = fmt == "delta-py"
                # delta: lakefeed's default writer (Spark's, files written in place)
                writer = {"lakefeed.writer": "python"} if python else {}
                query = (
                    stream_input()
                    .writeStream.format("delta" if python else fmt)
                    .options(**writer)
                    .option("checkpointLocation", cp)
                    .trigger(availableNow=True)
                    .start(out)
                )
                query.awaitTermination()
                progress[f"{fmt}-{attempt}"] = [json.loads(p.json) for p in query.recentProgress]

            return run

        def batch_write(fmt: str, attempt: int) -> Callable[[], None]:
            def run() -> None:
                python = fmt == "delta-py"
                (
                    spark.read.schema(schema)
                    .parquet(str(work / "input"))
                    .write.format("delta" if python else fmt)
                    .option("lakefeed.writer", "python" if python else "spark")
                    .mode("append")
                    .save(str(work / f"{fmt}-write-{attempt}"))
                )

            return run

        def source(fmt: str, attempt: int, table: str) -> Callable[[], None]:
            def run() -> None:
                reader = spark.readStream.option("maxFilesPerTrigger", limit)
                if fmt == "parquet":
                    frame = reader.schema(schema).parquet(str(table))
                elif fmt in ("delta", "delta-py"):
                    frame = (
                        reader.format("delta")
                        .option("lakefeed.reader", "python" if fmt == "delta-py" else "spark")
                        .load(str(table))
                    )
                else:
                    frame = reader.format(fmt).option("ddl", ddl).load(str(table))
                query = (
                    frame.writeStream.format("noop")
                    .option("checkpointLocation", str(work / f"src-{fmt}-cp-{attempt}"))
                    .trigger(availableNow=True)
                    .start()
                )
                query.awaitTermination()

            return run

        def batch_read(fmt: str, table: str) -> Callable[[], None]:
            def run() -> None:
                if fmt == "parquet":
                    frame = spark.read.schema(schema).parquet(str(table))
                else:
                    frame = (
                        spark.read.format("delta")
                        .option("lakefeed.reader", "python" if fmt == "delta-py" else "spark")
                        .load(str(table))
                    )
                frame.write.format("noop").mode("overwrite").save()

            return run

        spark.dataSource.register(PythonApiCeiling)
        ddl = schema.simpleString()[len("struct<") : -1].replace(":", " ")
        ceiling = PythonApiCeiling.name()
        kinds = {"pq": "parquet", "delta": "delta", "delta-py": "delta-py", "pyds": ceiling}

        def kind_of(key: str) -> str:
            return kinds[key.rsplit("-", 1)[0]]

        # Warm up the JVM and the Python workers once per path (the Delta sink's table is the
        # source legs' input).
        needs_table = any(not key.endswith(("sink", "write")) for key in selected)
        for fmt in dict.fromkeys([kind_of(k) for k in selected if k.endswith("sink")]):
            sink(fmt, 99)()
        if needs_table:
            sink("delta", 99)()
        for fmt in dict.fromkeys([kind_of(k) for k in selected if k.endswith("write")]):
            batch_write(fmt, 99)()
        table = storage.join(sink_root, "delta-out-99")  # Delta; its files are plain parquet
        results: dict[str, list[float]] = {k: [] for k in selected}
        for attempt in range(args.repeats):
            for key in selected:
                kind = kind_of(key)
                if key.endswith("read"):
                    leg = batch_read(kind, table)
                elif key.endswith("sink"):
                    leg = sink(kind, attempt)
                elif key.endswith("write"):
                    leg = batch_write(kind, attempt)
                else:
                    leg = source(kind, attempt, table)
                results[key].append(timed(leg))
        rows = _check_rows(sink_root, selected, args.rows // args.files * args.files)
        rate = {k: rows / min(v) for k, v in results.items()}
        print(f"rows={rows:,} files={args.files} maxFilesPerTrigger={limit} master={args.master}")
        for key, seconds in results.items():
            print(
                f"  {key:<13} best {min(seconds):6.2f} s  {rate[key]:>12,.0f} rows/s  "
                f"(runs: {', '.join(f'{s:.2f}' for s in seconds)})"
            )
        _print_ratios(rate)
        _record(run, rate, f"{count(rows)} rows, {args.files} Parquet files, availableNow")
        protocol.emit(
            rows=rows,
            session_s=session_s,
            legs={k: {"rows_per_s": rate[k], "runs_s": v} for k, v in results.items()},
            durations_ms={k: protocol.sum_durations(v) for k, v in progress.items()},
            query_ids={k: v[0]["id"] for k, v in progress.items() if v},
        )
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_rows(sink_root: str, legs: list[str], expected: int) -> int:
    """Every input row reached the Delta table of the first measured Delta sink run."""
    from deltalake import DeltaTable

    from lakefeed.core import storage

    for fmt in ("delta", "delta-py"):
        if f"{fmt}-sink" in legs:
            table = DeltaTable(storage.join(sink_root, f"{fmt}-out-0"))
            written = table.to_pyarrow_dataset().count_rows()
            assert written == expected, (fmt, written, expected)
    return expected


RATIOS = (
    ("sink ratio   delta/parquet", "delta-sink", "pq-sink", "target >= 0.9"),
    ("source ratio delta/parquet", "delta-src", "pq-src", "target >= 0.8"),
    ("batch read   delta/parquet", "delta-read", "pq-read", "no target"),
    ("  Python reader", "delta-py-read", "pq-read", "no target"),
    ("batch write  delta/parquet", "delta-write", "pq-write", "no target"),
    ("  Python writer", "delta-py-write", "pq-write", "no target"),
    ("sink   ceiling: Python Data Source API alone", "pyds-sink", "pq-sink", "x parquet"),
    ("  delta-py-sink", "delta-py-sink", "pq-sink", "x parquet"),
    ("  delta-py-sink / that ceiling", "delta-py-sink", "pyds-sink", ""),
    ("src    ceiling: Python Data Source API alone", "pyds-src", "pq-src", "x parquet"),
    ("  delta-py-src", "delta-py-src", "pq-src", "x parquet"),
    ("  delta-py-src / that ceiling", "delta-py-src", "pyds-src", ""),
)


# The page's rows: file, benchmark, baseline, the two legs, target, order. The first row's
# workload names the input; the others read "the same".
PAGE_ROWS = (
    ("delta_sink", "Delta streaming sink", "Spark's Parquet sink", "delta-sink", "pq-sink", 0.9),
    (
        "delta_source",
        "Delta streaming source",
        "Spark's Parquet source",
        "delta-src",
        "pq-src",
        0.8,
    ),
    (
        "delta_batch_write",
        "Delta batch write",
        "`df.write.parquet`",
        "delta-write",
        "pq-write",
        None,
    ),
    ("delta_batch_read", "Delta batch read", "`spark.read.parquet`", "delta-read", "pq-read", None),
)
SAME = {
    "delta_source": "the same files → noop",
    "delta_batch_write": "the same rows",
    "delta_batch_read": "the same table → noop",
}


def _record(run: Run, rate: dict[str, float], workload: str) -> None:
    """The page's Delta rows whose two legs ran."""
    for order, (name, benchmark, baseline, mine, theirs, target) in enumerate(PAGE_ROWS, 1):
        if mine in rate and theirs in rate:
            run.record(
                name,
                benchmark=benchmark,
                workload=SAME.get(name, workload),
                baseline=baseline,
                order=order * 10,
                ratio=round(rate[mine] / rate[theirs], 2),
                target=target,
            )


def _print_ratios(rate: dict[str, float]) -> None:
    """The ratios whose two legs ran."""
    for label, mine, theirs, note in RATIOS:
        if mine in rate and theirs in rate:
            print(f"{label} = {rate[mine] / rate[theirs]:.2f}x ({note})".replace(" ()", ""))


if __name__ == "__main__":
    main()
