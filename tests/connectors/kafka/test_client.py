"""The Spark-free broker layer against the real tansu broker: watermarks, ranges, sink, errors."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition

from lakefeed.connectors.kafka.client import BrokerView, DataLossError, KafkaSourceError
from lakefeed.connectors.kafka.consume import arrow_schema, read_range
from lakefeed.connectors.kafka.offsets import OffsetRange
from lakefeed.connectors.kafka.options import (
    KafkaOptionError,
    parse_sink_options,
    parse_source_options,
)
from lakefeed.connectors.kafka.produce import KafkaSinkError, write_batches
from tests.connectors.kafka.broker import Tansu
from tests.support.net import free_port

SECRET = "pa55-w0rd-never-shown"


def source(broker_or_servers: Tansu | str, topic: str, **options: str):
    servers = getattr(broker_or_servers, "bootstrap", broker_or_servers)
    return parse_source_options(
        {"kafka.bootstrap.servers": servers, "subscribe": topic, **options}, batch=True
    )


def test_latest_offsets_are_exact_although_the_broker_misreports_them(broker: Tansu) -> None:
    topic = broker.create_topic(2)
    broker.produce(topic, [b"x"] * 500, partition=0)  # batched by the producer (linger.ms)
    broker.produce(topic, [b"y"] * 7, partition=1, **{"batch.num.messages": 1})
    raw = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
    reported = raw.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)
    raw.close()
    assert reported[1] < 500, "tansu's ListOffsets quirk is gone: this test can be simplified"
    view = BrokerView(source(broker, topic))
    try:
        assert view.partitions() == [(topic, 0), (topic, 1)]
        assert view.watermarks(view.partitions()) == {(topic, 0): (0, 500), (topic, 1): (0, 7)}
    finally:
        view.close()


def test_a_range_reads_exactly_its_offsets_with_spark_schema(broker: Tansu) -> None:
    topic = broker.create_topic(1)
    values = [f"v{i}".encode() for i in range(300)]
    broker.produce(
        topic,
        values,
        keys=[f"k{i}" if i % 3 else None for i in range(300)],
        headers=[[("h", str(i).encode()), ("z", b"")] if i % 2 else None for i in range(300)],
    )
    options = source(broker, topic, includeHeaders="true")
    batches = list(read_range(options, OffsetRange(topic, 0, 100, 250)))
    table = pa.Table.from_batches(batches, schema=arrow_schema(True))
    assert table.column("offset").to_pylist() == list(range(100, 250))
    assert table.column("value").to_pylist() == values[100:250]
    assert table.column("key").to_pylist()[:3] == [b"k100", b"k101", None]
    assert table.column("headers").to_pylist()[:2] == [
        [],
        [{"key": "h", "value": b"101"}, {"key": "z", "value": b""}],
    ]
    assert set(table.column("topic").to_pylist()) == {topic}
    assert set(table.column("partition").to_pylist()) == {0}
    assert set(table.column("timestampType").to_pylist()) == {0}  # CreateTime, as in Spark
    stamps = table.column("timestamp").to_pylist()
    assert all(abs(s.timestamp() - time.time()) < 120 for s in stamps)


def test_range_beyond_the_broker_end_is_data_loss_not_a_hang(broker: Tansu) -> None:
    topic = broker.create_topic(1)
    broker.produce(topic, [b"a"] * 10, **{"batch.num.messages": 1})
    strict = source(broker, topic, **{"kafkaConsumer.pollTimeoutMs": "1500"})
    started = time.monotonic()
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        list(read_range(strict, OffsetRange(topic, 0, 5, 20)))
    assert time.monotonic() - started < 10
    lenient = source(
        broker, topic, failOnDataLoss="false", **{"kafkaConsumer.pollTimeoutMs": "1500"}
    )
    rows = sum(b.num_rows for b in read_range(lenient, OffsetRange(topic, 0, 5, 20)))
    assert rows == 5


def test_unreachable_broker_fails_fast_without_leaking_secrets() -> None:
    servers = f"127.0.0.1:{free_port()}"
    options = source(
        servers,
        "t",
        **{
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.username": "u",
            "kafka.sasl.password": SECRET,
            "fetchOffset.timeoutMs": "2000",
        },
    )
    view = BrokerView(options)
    started = time.monotonic()
    with pytest.raises(KafkaSourceError) as info:
        view.partitions()
    view.close()
    assert time.monotonic() - started < 8
    message = str(info.value)
    assert "kafka.bootstrap.servers" in message and servers in message
    assert SECRET not in message and SECRET not in repr(options)


def test_unknown_librdkafka_setting_is_an_option_error() -> None:
    view = BrokerView(source("127.0.0.1:1", "t", **{"kafka.no.such.setting": "1"}))
    with pytest.raises(KafkaOptionError, match="no.such.setting"):
        view.partitions()


def _sink_batch(n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": [f"k{i}" for i in range(n)],
            "value": [f"v{i}".encode() for i in range(n)],
            "headers": [[{"key": "src", "value": b"lakefeed"}]] * n,
            "ignored": list(range(n)),
        },
        schema=pa.schema(
            [
                ("key", pa.string()),
                ("value", pa.binary()),
                (
                    "headers",
                    pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
                ),
                ("ignored", pa.int64()),
            ]
        ),
    )


def test_sink_delivers_everything_and_reads_back(broker: Tansu) -> None:
    topic = broker.create_topic(1)
    options = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": topic})
    assert write_batches(options, [_sink_batch(200), _sink_batch(50)]) == 250
    read = source(broker, topic, includeHeaders="true")
    table = pa.Table.from_batches(list(read_range(read, OffsetRange(topic, 0, 0, 250))))
    assert table.column("key").to_pylist()[:2] == [b"k0", b"k1"]
    assert table.column("value").to_pylist()[199:201] == [b"v199", b"v0"]
    assert table.column("headers").to_pylist()[0] == [{"key": "src", "value": b"lakefeed"}]


def test_sink_delivery_errors_fail_the_batch() -> None:
    options = parse_sink_options(
        {
            "kafka.bootstrap.servers": f"127.0.0.1:{free_port()}",
            "topic": "t",
            "kafka.message.timeout.ms": "1500",
            "kafka.sasl.password": SECRET,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "PLAIN",
            "kafka.sasl.username": "u",
        }
    )
    with pytest.raises(KafkaSinkError, match="could not be delivered") as info:
        write_batches(options, [_sink_batch(5)])
    assert SECRET not in str(info.value)
