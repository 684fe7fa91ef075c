"""The lakefeed_kafka source and sink inside Spark, against the real tansu broker (and a few
tests on Apache Kafka too)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import lakefeed
from lakefeed.connectors.kafka.lag import lag_from_progress
from tests.connectors.kafka.broker import Broker, Tansu, on_both_brokers
from tests.connectors.kafka.spark_support import run_to_end
from tests.support.net import free_port

FORMAT = "lakefeed_kafka"


def kafka_stream(spark: Any, broker: Broker | str, **options: Any) -> Any:
    servers = getattr(broker, "bootstrap", broker)
    reader = spark.readStream.format(FORMAT).option("kafka.bootstrap.servers", servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def run_available_now(df: Any, out: Path, checkpoint: Path, timeout: float = 180) -> Any:
    """Run to completion into a parquet folder; return the finished query."""
    query = run_to_end(
        lambda: (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        ),
        timeout,
    )
    if query.exception() is not None:
        raise AssertionError(str(query.exception()))
    return query


def offsets_read(spark: Any, out: Path) -> list[tuple[int, int]]:
    rows = spark.read.parquet(str(out)).select("partition", "offset").collect()
    return sorted((r.partition, r.offset) for r in rows)


@on_both_brokers
def test_stream_reads_each_message_once_with_rate_limit_and_lag(
    spark: Any, broker: Broker, tmp_path: Path
) -> None:
    topic = broker.create_topic(3)
    for partition in range(3):
        broker.produce(
            topic, [f"{partition}-{i}" for i in range(200 + 50 * partition)], partition=partition
        )
    df = kafka_stream(
        spark,
        broker,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger=250,
        minPartitions=4,
    )
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]
    query = run_available_now(df, tmp_path / "out", tmp_path / "cp")
    expected = [(p, o) for p in range(3) for o in range(200 + 50 * p)]
    assert offsets_read(spark, tmp_path / "out") == expected
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in progress] == [250, 250, 250, 0][: len(progress)] or all(
        p["numInputRows"] <= 250 for p in progress
    )
    assert sum(p["numInputRows"] for p in progress) == 750
    first = lag_from_progress(progress[0]["sources"][0])
    assert first is not None and first["total"] == 500
    assert set(first["partitions"]) == {f"{topic}-0", f"{topic}-1", f"{topic}-2"}
    assert lag_from_progress(progress[-1]["sources"][0]) == {
        "total": 0,
        "partitions": {f"{topic}-0": 0, f"{topic}-1": 0, f"{topic}-2": 0},
    }


def test_latest_start_survives_restarts_and_picks_up_new_topics(
    spark: Any, broker: Tansu, tmp_path: Path
) -> None:
    prefix = f"p{uuid.uuid4().hex[:6]}"
    first = broker.create_topic(2, name=f"{prefix}-a")
    broker.produce(first, ["before"] * 30)
    df = kafka_stream(spark, broker, subscribePattern=f"{prefix}-.*", includeHeaders=True)
    out, cp = tmp_path / "out", tmp_path / "cp"
    run_available_now(df, out, cp)  # fixes where "latest" was: nothing read
    broker.produce(first, ["after"] * 20, headers=[[("n", b"1")]] * 20)
    second = broker.create_topic(1, name=f"{prefix}-b")  # appears after the start
    broker.produce(second, ["new"] * 5)
    run_available_now(df, out, cp)
    table = spark.read.parquet(str(out))
    values = sorted(r.value.decode() for r in table.select("value").collect())
    assert values == ["after"] * 20 + ["new"] * 5
    assert table.where(f"topic = '{first}'").select("headers").first().headers[0].key == "n"


def test_assign_and_per_partition_starting_offsets(
    spark: Any, broker: Tansu, tmp_path: Path
) -> None:
    topic = broker.create_topic(2)
    for partition in range(2):
        broker.produce(topic, [f"m{i}" for i in range(40)], partition=partition)
    df = kafka_stream(
        spark,
        broker,
        assign=json.dumps({topic: [1]}),
        startingOffsets=json.dumps({topic: {"1": 25}}),
    )
    run_available_now(df, tmp_path / "out", tmp_path / "cp")
    assert offsets_read(spark, tmp_path / "out") == [(1, o) for o in range(25, 40)]


def test_batch_read_between_offsets_with_min_partitions(spark: Any, broker: Tansu) -> None:
    topic = broker.create_topic(2)
    for partition in range(2):
        broker.produce(topic, [str(i) for i in range(100)], partition=partition)
    df = (
        spark.read.format(FORMAT)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 10, "1": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 60, "1": -1}}))
        .option("minPartitions", 6)
        .load()
    )
    assert df.rdd.getNumPartitions() == 6
    rows = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert rows == [(0, o) for o in range(10, 60)] + [(1, o) for o in range(100)]


@on_both_brokers
def test_sink_stream_and_batch_round_trip(spark: Any, broker: Broker, tmp_path: Path) -> None:
    source, target = broker.create_topic(2), broker.create_topic(1)
    broker.produce(source, [f"v{i}" for i in range(60)], keys=[f"k{i}" for i in range(60)])
    copied = kafka_stream(spark, broker, subscribe=source, startingOffsets="earliest").selectExpr(
        "key", "upper(CAST(value AS STRING)) AS value"
    )
    query = run_to_end(
        lambda: (
            copied.writeStream.format(FORMAT)
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", target)
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start()
        )
    )
    assert query.exception() is None
    spark.createDataFrame([("b1", target)], "value string, topic string").write.format(
        FORMAT
    ).option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    back = (
        spark.read.format(FORMAT)
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", target)
        .load()
        .selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
        .collect()
    )
    assert sorted((r.k or "", r.v) for r in back) == sorted(
        [(f"k{i}", f"V{i}") for i in range(60)] + [("", "b1")]
    )


def test_misuse_is_refused_before_the_query_starts(spark: Any, broker: Tansu) -> None:
    with pytest.raises(Exception, match="Did you mean startingOffsets"):
        kafka_stream(spark, broker, subscribe="x", startingOffset="earliest")
    df = spark.createDataFrame([(1,)], "id int")
    with pytest.raises(Exception, match="needs a value column"):
        df.write.format(FORMAT).option("kafka.bootstrap.servers", broker.bootstrap).option(
            "topic", "x"
        ).mode("append").save()


def test_unreachable_broker_fails_the_query_within_seconds(spark: Any, tmp_path: Path) -> None:
    secret = "sasl-secret-xyz"
    df = kafka_stream(
        spark,
        f"127.0.0.1:{free_port()}",
        subscribe="t",
        **{
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.username": "u",
            "kafka.sasl.password": secret,
        },
    )
    started = time.monotonic()
    query = run_to_end(
        lambda: (
            df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")).start()
        ),
        timeout=90,
    )
    message = str(query.exception())
    # The broker call itself gives up after 5 s (fetchOffset.timeoutMs, see test_client); the
    # rest is Spark starting the query, slow on a shared machine.
    assert time.monotonic() - started < 60
    assert "kafka.bootstrap.servers" in message
    assert secret not in message


def test_deleted_topic_is_data_loss(spark: Any, broker: Tansu, tmp_path: Path) -> None:
    topic = broker.create_topic(1)
    broker.produce(topic, ["a"] * 10)
    df = kafka_stream(spark, broker, subscribe=topic, startingOffsets="earliest")
    run_available_now(df, tmp_path / "out", tmp_path / "cp")
    broker.delete_topic(topic)
    with pytest.raises(AssertionError, match="failOnDataLoss"):
        run_available_now(df, tmp_path / "out", tmp_path / "cp")
    lenient = kafka_stream(
        spark, broker, subscribe=topic, startingOffsets="earliest", failOnDataLoss="false"
    )
    run_available_now(lenient, tmp_path / "out", tmp_path / "cp")
    assert len(offsets_read(spark, tmp_path / "out")) == 10


def test_recreated_topic_is_data_loss_or_read_again_from_earliest(
    spark: Any, apache_kafka: Broker, tmp_path: Path
) -> None:
    """Issue 31: 100 read, the topic recreated with 150 new messages; the next run read only the
    last 50 and reported nothing. The topic id recorded with the offsets tells it."""
    topic = apache_kafka.create_topic(1)
    apache_kafka.produce(topic, [f"old{i}" for i in range(100)])
    out, cp = tmp_path / "out", tmp_path / "cp"
    run_available_now(
        kafka_stream(spark, apache_kafka, subscribe=topic, startingOffsets="earliest"), out, cp
    )
    apache_kafka.recreate_topic(topic)
    apache_kafka.produce(topic, [f"new{i}" for i in range(150)])
    with pytest.raises(AssertionError, match="KAFKA_DATA_LOSS.*deleted and created again"):
        run_available_now(
            kafka_stream(spark, apache_kafka, subscribe=topic, startingOffsets="earliest"), out, cp
        )
    lenient = kafka_stream(
        spark, apache_kafka, subscribe=topic, startingOffsets="earliest", failOnDataLoss="false"
    )
    run_available_now(lenient, out, cp)
    values = [r.value.decode() for r in spark.read.parquet(str(out)).select("value").collect()]
    assert sorted(values) == sorted(
        [f"old{i}" for i in range(100)] + [f"new{i}" for i in range(150)]
    )


def test_read_kafka_in_the_style_of_the_api(spark: Any, broker: Tansu, tmp_path: Path) -> None:
    topic = broker.create_topic(1)
    broker.produce(topic, ["x"] * 12)
    df = lakefeed.read_kafka(
        topic,
        bootstrap_servers=broker.bootstrap,
        starting_offsets="earliest",
        max_offsets_per_trigger=5,
        fail_on_data_loss=True,
    )
    assert df.isStreaming
    query = run_available_now(df, tmp_path / "out", tmp_path / "cp")
    assert len(offsets_read(spark, tmp_path / "out")) == 12
    assert max(p["numInputRows"] for p in query.recentProgress) == 5
