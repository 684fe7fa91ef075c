"""A run shares Spark fairly between flows and compacts their tables, in the background of a
continuous run or after each flow of a triggered one (lakefeed.runtime.pools, .compaction)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
from deltalake import DeltaTable

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.pools import STREAMS_POOL
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import load, table, write

# A UDF reports the pool its task ran in: the local property Spark hands every task.
PIPELINE = """
from pyspark import TaskContext
from pyspark.sql import functions as F
import lakefeed as lf

@F.udf("string")
def pool():
    return TaskContext.get().getLocalProperty("spark.scheduler.pool")

@lf.table
def raw_a():
    options = {"totalRows": "20", "rowsPerSecond": "10", "startTime": "2026-01-01T00:00:00Z"}
    return lf.source("iot", **options).withColumn("pool", pool())

@lf.table
def clean_b():
    return lf.read_stream("raw_a").select("offset", pool().alias("pool"))

@lf.materialized_view
def count_c():
    return lf.read("clean_b").groupBy().count().withColumn("pool", pool())
"""


def test_micro_batches_share_one_pool_and_batch_work_has_its_own(spark, tmp_path: Path) -> None:
    """Every flow's micro-batches run in the one FIFO pool (first come, first served), a
    materialized view's refresh in a pool of its name beside it. One pool per flow ordered
    the waiting flows by name whenever the slots were contended (FAIR's tie-break)."""
    lakehouse = Lakehouse.at(tmp_path / "lh")
    pipeline = load([write(tmp_path / "p", {"pools.py": PIPELINE})])
    result = PipelineRunner(pipeline, lakehouse, spark, RunOptions(mode="once")).run()
    assert result.ok, result.errors
    expected = {"raw_a": STREAMS_POOL, "clean_b": STREAMS_POOL, "count_c": "count_c"}
    for name, pool in expected.items():
        pools = table(lakehouse, name).column("pool")
        assert len(pools) and pc.all(pc.equal(pools, pool)).as_py(), (name, pools)
        # the pool exists only because the scheduler is FAIR (FIFO ignores the property)
        assert spark._jsc.sc().getPoolForName(pool).isDefined()
    streams = spark._jsc.sc().getPoolForName(STREAMS_POOL).get()
    assert streams.schedulingMode().toString() == "FIFO"  # inside: by submission order
    assert spark.sparkContext.getConf().get("spark.scheduler.mode") == "FAIR"
    assert spark.sparkContext.getLocalProperty("spark.scheduler.pool") is None
    # made on purpose: Spark's warning that each pool "has not been configured" is not logged
    builder = "org.apache.spark.scheduler.FairSchedulableBuilder"
    level = spark._jvm.org.apache.logging.log4j.LogManager.getLogger(builder).getLevel()
    assert level.toString() == "ERROR"


COMPACTED = """
import lakefeed as lf

@lf.table
def readings():
    options = {"rowsPerSecond": "50", "startTime": "2026-01-01T00:00:00Z", "maxRowsPerTrigger": "5"}
    total = lf.config("iot.totalRows")
    if total:
        options["totalRows"] = total
    return lf.source("iot", **options).select("offset")
"""


def test_a_continuous_run_compacts_its_streaming_tables(spark, tmp_path: Path) -> None:
    """Many micro-batches, each a small file; the run's compactor keeps the count down."""
    lakehouse = Lakehouse.at(tmp_path / "lh")
    pipeline = load([write(tmp_path / "p", {"compacted.py": COMPACTED})])
    options = RunOptions(
        mode="continuous", duration=12, trigger_interval="1 second", compact_interval=0.5
    )
    key = "spark.databricks.delta.autoCompact.minNumFiles"
    spark.conf.set(key, "4")
    try:
        result = PipelineRunner(pipeline, lakehouse, spark, options).run()
    finally:
        spark.conf.unset(key)
    assert result.ok, result.errors
    path = str(lakehouse.table_path("readings"))
    operations = [h["operation"] for h in DeltaTable(path).history()]
    assert "OPTIMIZE" in operations
    offsets = table(lakehouse, "readings").column("offset").to_pylist()
    assert sorted(offsets) == list(range(len(offsets)))  # each row once, none lost
    batches = len(DeltaTable(path).history()) - operations.count("OPTIMIZE")
    assert len(DeltaTable(path).file_uris()) < max(8, batches // 2), (batches, operations)


def test_a_triggered_run_compacts_each_table_after_its_flow(spark, tmp_path: Path) -> None:
    lakehouse = Lakehouse.at(tmp_path / "lh")
    conf = {"iot.totalRows": "40"}
    pipeline = load([write(tmp_path / "p", {"compacted.py": COMPACTED})], conf)
    key = "spark.databricks.delta.autoCompact.minNumFiles"
    spark.conf.set(key, "4")
    try:
        result = PipelineRunner(pipeline, lakehouse, spark, RunOptions("available-now")).run()
    finally:
        spark.conf.unset(key)
    assert result.ok, result.errors
    path = str(lakehouse.table_path("readings"))
    assert [h["operation"] for h in DeltaTable(path).history()].count("OPTIMIZE") == 1
    assert len(DeltaTable(path).file_uris()) == 1  # 8 batches of 5 rows, then one file
    assert sorted(table(lakehouse, "readings").column("offset").to_pylist()) == list(range(40))
