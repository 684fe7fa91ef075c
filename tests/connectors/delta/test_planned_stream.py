"""A Delta stream planned in Python and read by Spark's Parquet reader (lakefeed.spark.jvm).

The same offsets and files as the Python Data Source reader, so both must produce the same
rows: partition values of every type, files older than a column, limits, restarts.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


def _landed(path: Path) -> None:
    """Commits by delta-rs: typed partitions (a null one among them), then a new column."""
    stamp = dt.datetime(2026, 11, 23, 12, 30, 15, 250000, tzinfo=dt.UTC)
    for commit in range(3):
        ids = list(range(commit * 4, commit * 4 + 4))
        write_deltalake(
            str(path),
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "name": [f"r{i}" for i in ids],
                    "part": ["a b/c%" if i % 2 else None for i in ids],
                    "day": pa.array([dt.date(2026, 1, 1 + i % 2) for i in ids], pa.date32()),
                    "at": pa.array([stamp] * 4, pa.timestamp("us", tz="UTC")),
                    "amount": pa.array([Decimal("1.25")] * 4, pa.decimal128(9, 2)),
                }
            ),
            partition_by=["part", "day", "at", "amount"],
            mode="append",
        )
    write_deltalake(
        str(path),
        pa.table(
            {
                "id": pa.array([100], pa.int64()),
                "name": ["late"],
                "part": ["z"],
                "day": pa.array([dt.date(2026, 2, 1)], pa.date32()),
                "at": pa.array([stamp], pa.timestamp("us", tz="UTC")),
                "amount": pa.array([Decimal("2.50")], pa.decimal128(9, 2)),
                "extra": [7.5],
            }
        ),
        partition_by=["part", "day", "at", "amount"],
        mode="append",
        schema_mode="merge",
    )


def _stream(spark, src: Path, reader: str, checkpoint: Path) -> tuple[list, list[dict]]:
    rows: list = []
    frame = (
        spark.readStream.format("delta")
        .option("lakefeed.reader", reader)
        .option("maxFilesPerTrigger", 3)
        .load(str(src))
    )
    query = (
        frame.writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(240)
    finally:
        query.stop()
    return sorted(rows, key=lambda r: r["id"]), query.recentProgress


def test_spark_and_python_readers_stream_the_same_rows(spark, tmp_path: Path) -> None:
    src = tmp_path / "src"
    _landed(src)
    native, progress = _stream(spark, src, "spark", tmp_path / "cp-spark")
    python, python_progress = _stream(spark, src, "python", tmp_path / "cp-python")

    assert progress[0]["sources"][0]["description"] == f"DeltaSource[{src}]"
    assert "PythonMicroBatchStream" in python_progress[0]["sources"][0]["description"]
    assert native == python
    assert [r["id"] for r in native] == [*range(12), 100]
    first = native[0]
    assert first["part"] is None and first["day"] == dt.date(2026, 1, 1)
    assert native[1]["part"] == "a b/c%"
    # Spark hands timestamps to Python in its local time.
    assert first["at"].astimezone(dt.UTC) == dt.datetime(2026, 11, 23, 12, 30, 15, 250000, dt.UTC)
    assert first["amount"] == Decimal("1.25") and first["extra"] is None
    assert native[-1]["extra"] == 7.5
    # The same batches: maxFilesPerTrigger is honoured by the planner on both paths.
    batch_rows = [p["numInputRows"] for p in progress]
    assert batch_rows == [p["numInputRows"] for p in python_progress]
    assert len(batch_rows) > 1


def test_planned_stream_restarts_starts_twice_and_prunes_partitions(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    src, out = tmp_path / "src", tmp_path / "out"
    write_deltalake(str(src), pa.table({"id": [1, 2], "k": ["x", "y"]}), partition_by=["k"])
    frame = spark.readStream.format("delta").load(str(src)).where(F.col("k") == "y")

    def run(checkpoint: str, table: str) -> None:
        query = (
            frame.writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start(str(out / table))
        )
        query.awaitTermination(240)
        query.stop()

    def ids(table: str) -> list[int]:
        return sorted(r.id for r in spark.read.format("delta").load(str(out / table)).collect())

    run("cp1", "one")
    write_deltalake(str(src), pa.table({"id": [3, 4], "k": ["y", "x"]}), mode="append")
    run("cp1", "one")  # the same checkpoint: only the new commit
    run("cp2", "two")  # a second query of the same DataFrame: everything
    assert ids("one") == [2, 3]
    assert ids("two") == [2, 3]
    commits = sorted((out / "one" / "_delta_log").glob("*.json"))
    assert len(commits) == 2  # one batch per run, nothing replayed


def test_unknown_reader_option_is_refused(spark, tmp_path: Path) -> None:
    src = tmp_path / "src"
    write_deltalake(str(src), pa.table({"id": [1]}))
    with pytest.raises(ValueError, match="lakefeed.reader is 'spark' or 'python'"):
        spark.readStream.format("delta").option("lakefeed.reader", "jvm").load(str(src))


def _scans(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


def test_batch_reads_use_sparks_parquet_reader_and_match_the_python_reader(
    spark, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from lakefeed.connectors.delta.datasource import latest_frame

    src = tmp_path / "src"
    _landed(src)

    def rows(frame) -> list:
        return sorted(frame.collect(), key=lambda r: r["id"])

    native = spark.read.format("delta").load(str(src))
    python = spark.read.format("delta").option("lakefeed.reader", "python").load(str(src))
    # Planned anew by each query reading it (see test_stream_static): Spark's Parquet scans.
    assert f"Scan DeltaTable[{src}]" in _scans(native)
    inner = latest_frame(str(src), native.schema, spark)
    assert "FileScan parquet" in _scans(inner)
    assert "FileScan parquet" not in _scans(python)
    assert rows(native) == rows(python) and len(rows(native)) == 13
    # A partition filter reaches the inner frame and removes the other groups' scans.
    late = native.where(F.col("part") == "z")
    assert [r["id"] for r in late.collect()] == [100]
    assert "EqualTo(part,z)" in _scans(late)
    assert _scans(inner.where(F.col("part") == "z")).count("FileScan parquet") == 1
    # Time travel: version 0 is the first commit's four rows, before the new column.
    first = spark.read.format("delta").option("versionAsOf", 0).load(str(src))
    assert sorted(r["id"] for r in first.collect()) == [0, 1, 2, 3]
    assert "extra" not in first.columns


def test_batch_read_of_many_partitions_or_an_empty_table(spark, tmp_path: Path) -> None:
    from lakefeed.connectors.delta.datasource import MAX_SCAN_GROUPS

    wide = tmp_path / "wide"
    count = MAX_SCAN_GROUPS + 1
    write_deltalake(
        str(wide), pa.table({"id": list(range(count)), "k": list(range(count))}), partition_by=["k"]
    )
    frame = spark.read.format("delta").load(str(wide))
    assert "FileScan parquet" not in _scans(frame)  # the Python reader keeps the plan small
    assert frame.count() == count

    empty = tmp_path / "empty"
    write_deltalake(str(empty), pa.table({"id": pa.array([], pa.int64())}))
    assert spark.read.format("delta").load(str(empty)).collect() == []


def _pool(spark) -> int:
    """Python objects the JVM holds proxies of, once the JVM collected the unreachable ones."""
    jvm = spark.sparkContext._jvm
    jvm.System.gc()
    jvm.System.runFinalization()
    return len(spark.sparkContext._gateway.gateway_property.pool)


def test_planned_streams_leave_nothing_behind_in_either_process(spark, tmp_path: Path) -> None:
    """A ``load()`` registers nothing (its plan carries its reader) and each query drops its
    planner when it stops: frames never started, derived frames and restarts leave the driver
    JVM's registry and Py4J's proxies where they were."""
    import time

    from pyspark.sql import functions as F

    from lakefeed.spark.jvm import bridge

    src = tmp_path / "src"
    write_deltalake(str(src), pa.table({"id": [1, 2, 3]}))
    spark.readStream.format("delta").load(str(src))  # the session's one factory exists
    registered, running, pool = bridge.registered(spark), bridge.open_planners(spark), _pool(spark)
    for _ in range(20):  # what validate does: DataFrames made and never started
        spark.readStream.format("delta").load(str(src)).where(F.col("id") > 1)
    frame = spark.readStream.format("delta").load(str(src)).where(F.col("id") > 1)
    for run in range(3):  # the same derived DataFrame started again after each stop
        query = (
            frame.writeStream.format("memory")
            .queryName(f"leak_{run}")
            .trigger(availableNow=True)
            .option("checkpointLocation", str(tmp_path / f"cp{run}"))
            .start()
        )
        query.awaitTermination(120)
        query.stop()
        assert spark.table(f"leak_{run}").count() == 2
    assert bridge.registered(spark) == registered
    assert bridge.open_planners(spark) == running
    deadline = time.monotonic() + 30
    while _pool(spark) > pool and time.monotonic() < deadline:
        time.sleep(0.2)  # the JVM tells Python about collected proxies asynchronously
    assert _pool(spark) <= pool
