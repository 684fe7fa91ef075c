"""The ``lakefeed_iot`` format on the shared SparkSession: batch, availableNow, replay."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from lakefeed.connectors.generator.iot import (
    PAYLOAD_DDL,
    GeneratorOptionError,
    IotConfig,
    generate_batch,
    wall_clock_ms,
)
from lakefeed.connectors.generator.source import IotStreamReader, RowRange, split
from tests.connectors.generator.test_iot import classify

START = "2026-03-01T12:00:00Z"  # in the past: every row of a capped stream has arrived


def expected(options: dict[str, object], start: int, end: int, start_ms: int | None = None):
    """What the core says rows [start, end) of a stream with these options contain."""
    config = IotConfig.from_options({k: str(v) for k, v in options.items()})
    if start_ms is not None:
        config = config.resolved(start_ms)
    return pa.Table.from_batches([generate_batch(config, start, end)])


def as_rows(table: pa.Table) -> list[tuple]:
    """Rows sorted by offset, ingest time as epoch microseconds (types differ by reader)."""
    ingest = table.column("ingest_time").cast(pa.int64()).to_pylist()
    rows = zip(
        table.column("offset").to_pylist(),
        ingest,
        table.column("device_id").to_pylist(),
        table.column("value").to_pylist(),
        strict=True,
    )
    return sorted(rows)


def stream(spark: SparkSession, options: dict[str, object]) -> DataFrame:
    return spark.readStream.format("lakefeed_iot").options(**options).load()


def uncommit(checkpoint: Path, batch_id: int) -> None:
    for name in (str(batch_id), f".{batch_id}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)


def stop_after(query: StreamingQuery, timeout: float = 120) -> None:
    try:
        assert query.awaitTermination(timeout), "query did not finish in time"
    finally:
        query.stop()


def test_batch_read_generates_total_rows_as_the_core_does(spark: SparkSession) -> None:
    options = {"totalRows": 3000, "startTime": START, "numPartitions": 3}
    df = spark.read.format("lakefeed_iot").options(**options).load()
    assert df.rdd.getNumPartitions() == 3
    assert [f.nullable for f in df.schema.fields] == [False, False, True, True]
    assert as_rows(df.toArrow()) == as_rows(expected(options, 0, 3000))


def test_silver_logic_drops_exactly_the_malformed_rows(spark: SparkSession) -> None:
    options = {"totalRows": 4000, "startTime": START, "malformedRate": 0.1, "duplicateRate": 0.1}
    raw = spark.read.format("lakefeed_iot").options(**options).load()
    parsed = raw.select("offset", F.from_json("value", PAYLOAD_DDL).alias("p")).select(
        "offset", "p.*"
    )
    valid = parsed.where("temperature BETWEEN -60 AND 150 AND device_id IS NOT NULL")
    kept = valid.select("offset", "event_time").toArrow()

    rows = [classify(row) for row in expected(options, 0, 4000).to_pylist()]
    silver = [row for row in rows if row["problem"] in (None, "empty_device")]
    assert sorted(kept.column("offset").to_pylist()) == [row["offset"] for row in silver]
    event_time = dict(zip(*kept.to_pydict().values(), strict=True))
    for row in silver[:200]:
        moment = row["payload"]["event_time"].replace("Z", "+00:00")
        assert event_time[row["offset"]] == datetime.fromisoformat(moment)
    unique_events = valid.dropDuplicates(["event_id"]).count()
    assert unique_events == len({row["payload"]["event_id"] for row in silver}) < len(silver)


def test_misuse_is_refused_before_anything_runs(spark: SparkSession) -> None:
    def reader() -> DataFrameReader:
        return spark.read.format("lakefeed_iot")

    with pytest.raises(PySparkException, match="needs option totalRows"):
        reader().load().count()
    with pytest.raises(PySparkException, match="unknown option 'rowspersec'"):
        reader().option("rowsPerSec", 5).load()
    with pytest.raises(PySparkException, match="has a fixed schema"):
        reader().schema("value string").option("totalRows", 1).load().count()


def test_available_now_into_delta_then_a_restart_adds_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    options = {"totalRows": 2500, "startTime": START, "maxRowsPerTrigger": 1000, "seed": 7}
    target, checkpoint = str(tmp_path / "bronze"), str(tmp_path / "checkpoint")

    def run() -> StreamingQuery:
        writer = stream(spark, options).writeStream.format("delta")
        query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True)
        started = query.start(target)
        stop_after(started)
        return started

    first = run()
    assert [p["numInputRows"] for p in first.recentProgress] == [1000, 1000, 500]
    assert json.loads(first.lastProgress["sources"][0]["latestOffset"])["offset"] == 2500
    table = DeltaTable(target)
    assert as_rows(table.to_pyarrow_table()) == as_rows(expected(options, 0, 2500))
    version = table.version()

    second = run()
    assert sum(p["numInputRows"] for p in second.recentProgress) == 0
    table.update_incremental()
    assert table.version() == version
    assert table.to_pyarrow_table().num_rows == 2500


def test_a_crashed_batch_replays_identical_rows_and_changed_options_are_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    # No startTime: the wall clock at the first start is kept in the checkpoint's offsets.
    options = {"rowsPerSecond": 100_000, "totalRows": 3000, "maxRowsPerTrigger": 1000}
    checkpoint = tmp_path / "checkpoint"
    seen: dict[int, list[tuple]] = {}

    def run(opts: dict[str, object]) -> StreamingQuery:
        def collect(batch: DataFrame, batch_id: int) -> None:
            seen[batch_id] = as_rows(batch.toArrow())

        writer = stream(spark, opts).writeStream.foreachBatch(collect)
        return writer.option("checkpointLocation", str(checkpoint)).start()

    query = run(options)
    try:
        query.processAllAvailable()
        while sum(len(rows) for rows in seen.values()) < 3000:
            query.processAllAvailable()
    finally:
        query.stop()
    first_run = dict(seen)
    last = max(first_run)
    start_ms = json.loads((checkpoint / "offsets" / "0").read_text().splitlines()[-1])
    start_ms = start_ms["startTime"]
    all_rows = sorted(row for rows in first_run.values() for row in rows)
    assert all_rows == as_rows(expected(options, 0, 3000, start_ms=start_ms))

    # As if the driver died after planning the last batch but before committing it.
    uncommit(checkpoint, last)
    seen.clear()
    query = run(options)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert seen == {last: first_run[last]}

    uncommit(checkpoint, last)
    refused = run({**options, "seed": 1})
    with pytest.raises(PySparkException, match=r"seed=1 \(checkpoint: 0\)"):
        refused.awaitTermination(120)
    refused.stop()


def test_offset_ranges_split_into_contiguous_non_empty_partitions() -> None:
    config = IotConfig(num_partitions=3, start_time_ms=0)
    assert split(config, 10, 10) == []
    assert [(p.start, p.end) for p in split(config, 10, 12)] == [(10, 11), (11, 12)]
    assert [(p.start, p.end) for p in split(config, 0, 10)] == [(0, 3), (3, 6), (6, 10)]


def test_stream_reader_admits_arrived_rows_within_the_read_limit() -> None:
    now = wall_clock_ms()
    reader = IotStreamReader(IotConfig(rows_per_second=1000, start_time_ms=now - 10_000))
    assert reader.reportLatestOffset() is None
    start = reader.initialOffset()
    assert start["offset"] == 0 and start["startTime"] == now - 10_000
    assert isinstance(reader.getDefaultReadLimit(), ReadAllAvailable)
    assert 10_000 < reader.latestOffset(start, ReadAllAvailable())["offset"] < 12_000
    assert reader.latestOffset(start, ReadMaxRows(500))["offset"] == 500
    assert reader.reportLatestOffset()["offset"] > 10_000  # type: ignore[index]
    limited = IotStreamReader(IotConfig(max_rows_per_trigger=7, total_rows=10))
    assert limited.getDefaultReadLimit() == ReadMaxRows(7)
    capped = limited.latestOffset(limited.initialOffset(), ReadAllAvailable())
    assert capped["offset"] <= 10


def test_available_now_freezes_the_clock_at_prepare_time() -> None:
    reader = IotStreamReader(IotConfig(rows_per_second=100_000))
    start = reader.initialOffset()  # the stream starts now: nothing has arrived yet
    reader.prepareForTriggerAvailableNow()
    frozen = reader.latestOffset(start, ReadAllAvailable())
    time.sleep(0.05)
    assert reader.latestOffset(start, ReadAllAvailable()) == frozen


def test_stream_reader_adopts_the_checkpoint_and_refuses_changes() -> None:
    checkpointed = IotStreamReader(IotConfig(seed=4)).initialOffset()
    restarted = IotStreamReader(IotConfig(seed=4))  # a later wall clock: the checkpoint wins
    [part] = restarted.partitions(checkpointed, {**checkpointed, "offset": 1})
    assert isinstance(part, RowRange)
    assert part.config.start_time_ms == checkpointed["startTime"]
    with pytest.raises(GeneratorOptionError, match=r"devices=5 \(checkpoint: 100\)"):
        IotStreamReader(IotConfig(seed=4, devices=5)).latestOffset(checkpointed, ReadMaxRows(1))
    pinned = IotStreamReader(IotConfig(seed=4, start_time_ms=1))
    with pytest.raises(GeneratorOptionError, match="startTime=1 "):
        pinned.partitions(checkpointed, checkpointed)
    with pytest.raises(GeneratorOptionError, match="use a new checkpointLocation"):
        restarted.latestOffset({"offset": 3}, ReadAllAvailable())
