"""A pipeline's reads work on a session without the compatibility layer (issue 30):
``spark.read.table``, ``spark.readStream.table`` and ``spark.table`` (``LIVE.x`` too) in DLT
and SDP files read the pipeline's datasets, put in by the files' surface alone; Kafka read
through lakefeed's own API (``lf.source``, ``lf.read_kafka``) runs, and the test kit feeds it."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.streaming.readwriter import DataStreamReader

import lakefeed as lf
from lakefeed.compat import patches
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.testing import PipelineTest
from tests.pipeline.support import table, write

DLT = """
import dlt


@dlt.table
def base():
    return spark.range(5)


@dlt.table
def by_reader():
    return spark.read.table("base").where("id > 2")


@dlt.table
def by_session():
    return spark.table("LIVE.base").where("id < 2")
"""


def test_reads_by_name_need_no_compat_layer(spark, tmp_path: Path) -> None:
    assert patches.installed() == []  # the suite's session: compat=False
    folder = write(tmp_path / "p", {"p.py": DLT})
    result = lf.run(folder, lakehouse=tmp_path / "lh", spark=spark, mode="available-now")
    assert result.ok, result
    lakehouse = Lakehouse.at(tmp_path / "lh")
    assert sorted(table(lakehouse, "by_reader")["id"].to_pylist()) == [3, 4]
    assert sorted(table(lakehouse, "by_session")["id"].to_pylist()) == [0, 1]


KAFKA = """
from pyspark.sql import functions as F

import lakefeed as lf


@lf.table
def readings_raw():
    return lf.source(
        "kafka",
        **{
            "kafka.bootstrap.servers": lf.config("bootstrap"),
            "subscribe": lf.config("topic"),
            "startingOffsets": "earliest",
        },
    )


@lf.table
def readings():
    raw = lf.read_stream("readings_raw")
    return raw.select("offset", F.col("value").cast("string").alias("reading"))
"""


def _reader_patches() -> list:
    """The patched pyspark reader methods (``format("kafka")``'s route, the kit's old hook)."""
    readers = (DataFrameReader, DataStreamReader)
    return [(cls, name) for cls, name in patches.installed() if cls in readers and name != "table"]


def test_kafka_through_the_connector_registry_needs_no_compat_layer(
    spark, broker, tmp_path: Path
) -> None:
    """``lf.source("kafka")`` reads through the connector registry (``lakefeed_kafka``), so a
    session without the compatibility layer runs it, twice exactly once."""
    topic = broker.create_topic()
    broker.produce(topic, ["r0", "r1", "r2"], **{"batch.num.messages": 1})
    folder = write(tmp_path / "p", {"p.py": KAFKA})
    conf = {"bootstrap": broker.bootstrap, "topic": topic}
    lakehouse = Lakehouse.at(tmp_path / "lh")
    result = lf.run(folder, lakehouse=lakehouse, spark=spark, conf=conf, mode="available-now")
    assert result.ok, result
    broker.produce(topic, ["r3"], **{"batch.num.messages": 1})
    result = lf.run(folder, lakehouse=lakehouse, spark=spark, conf=conf, mode="available-now")
    assert result.ok, result
    assert _reader_patches() == []
    found = sorted(table(lakehouse, "readings").to_pylist(), key=lambda r: r["offset"])
    assert found == [{"offset": i, "reading": f"r{i}"} for i in range(4)]


KIT = """
from pyspark.sql import functions as F

import lakefeed as lf


@lf.table
def by_source():
    records = lf.source(
        "kafka", **{"kafka.bootstrap.servers": "broker.invalid:9092", "subscribe": "gauges"}
    )
    return records.select("topic", F.col("value").cast("string").alias("value"))


@lf.table
def by_reader():
    records = lf.read_kafka(["pumps", "valves"], bootstrap_servers="broker.invalid:9092")
    return records.select("topic", F.col("value").cast("string").alias("value"))
"""


def test_the_test_kits_feed_needs_no_compat_layer(spark, tmp_path: Path) -> None:
    """The kit's tap stands in for the sources lakefeed's own reads resolve (``lf.source``,
    ``lf.read_kafka``) without any patched pyspark reader; the topics of one subscription are
    fed each by name."""
    folder = write(tmp_path / "p", {"p.py": KIT})
    kit = PipelineTest(folder, tmp_path / "kit", spark=spark)
    kit.feed("by_source", [{"topic": "gauges", "value": b"g0"}])
    kit.feed("by_reader", [{"topic": "pumps", "value": b"p0"}], source="pumps")
    kit.feed("by_reader", [{"topic": "valves", "value": b"v0"}], source="valves")
    kit.step()
    assert _reader_patches() == []
    assert kit.rows("by_source") == [{"topic": "gauges", "value": "g0"}]
    assert kit.rows("by_reader", ["topic"]) == [
        {"topic": "pumps", "value": "p0"},
        {"topic": "valves", "value": "v0"},
    ]  # each topic of one subscription fed by name (the kit refused the second before)
