"""lakefeed.deliveryGuarantee=exactly-once: one Kafka transaction per micro-batch, against tansu
and Apache Kafka (the replay check behind other producers' open transactions only on Apache
Kafka: tansu shows open transactions to ``read_committed`` readers).

Read back with ``isolation.level=read_committed``, as the sink's consumers must.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql.types import StringType, StructField, StructType

from lakefeed.connectors.kafka import transact
from lakefeed.connectors.kafka.options import KafkaOptionError, parse_sink_options
from lakefeed.connectors.kafka.sink import sink_options, stream_writer
from lakefeed.core.errors import DataLossRiskError, code_of
from tests.connectors.kafka.broker import Broker, on_both_brokers
from tests.connectors.kafka.spark_support import run_to_end
from tests.support.crash import run_driver_with_kills, spark_commits

EOS = {"lakefeed.deliveryGuarantee": "exactly-once"}
DRIVER = Path(__file__).with_name("crash_driver.py")
VALUE = StructType([StructField("value", StringType())])


# -- refused before the query starts (Spark-free) ---------------------------------------------


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"kafka.transactional.id": "mine"}, "lakefeed.transactionalIdPrefix"),
        ({"kafka.acks": "1"}, "contradicts"),
        ({"kafka.enable.idempotence": "false"}, "contradicts"),
        ({"lakefeed.deliveryGuarantee": "exactly_once"}, "exactly-once"),
    ],
)
def test_options_that_contradict_transactions_are_refused(extra: dict, match: str) -> None:
    with pytest.raises(KafkaOptionError, match=match):
        parse_sink_options({"kafka.bootstrap.servers": "h:9092", "topic": "t", **EOS, **extra})


def test_a_batch_write_or_a_stream_without_checkpoint_is_refused() -> None:
    options = {"kafka.bootstrap.servers": "h:9092", "topic": "t", **EOS}
    with pytest.raises(KafkaOptionError, match="streaming writes"):
        sink_options(options, VALUE, stream=False)
    with pytest.raises(KafkaOptionError, match="checkpointLocation"):
        stream_writer(sink_options(options, VALUE))
    assert not parse_sink_options({k: v for k, v in options.items() if k not in EOS}).exactly_once


# -- the transaction core against the broker --------------------------------------------------


@on_both_brokers
def test_a_committed_batch_is_skipped_and_a_zombie_is_fenced(broker: Broker) -> None:
    topic = broker.create_topic(1)
    options = parse_sink_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "topic": topic, **EOS}
    )
    txn = f"test-{uuid.uuid4().hex[:8]}"
    rows, count = transact.rows_to_ipc([pa.record_batch({"value": ["a", "b"], "other": [1, 2]})])
    assert count == 2
    assert transact.commit_batch(options, txn, 0, [rows, b""]) == 2
    assert transact.commit_batch(options, txn, 0, [rows]) == 0  # replayed after a crash
    # A zombie (older driver) with an open transaction is fenced by the next producer.
    zombie = transact.BatchProducer(options, **{"transactional.id": txn})
    zombie.producer.init_transactions(10)
    zombie.producer.begin_transaction()
    transact.fence(options, txn)
    assert transact.commit_batch(options, txn, 1, [rows]) == 2
    # tansu does not filter aborted transactions (its Fetch returns no aborted-transaction
    # list), so only committed rows are produced here, for both brokers.
    assert broker.committed_values(topic) == ["a", "b", "a", "b"]
    assert transact.committed_marker(options, txn) == transact.Marker(1, None)


@on_both_brokers
def test_a_batch_the_markers_hold_over_other_offsets_is_refused(broker: Broker) -> None:
    options = parse_sink_options(
        {"kafka.bootstrap.servers": broker.bootstrap, "topic": broker.create_topic(1), **EOS}
    )
    txn = f"test-{uuid.uuid4().hex[:8]}"
    a, b, c = (transact.rows_to_ipc([pa.record_batch({"value": [v]})])[0] for v in "abc")
    assert transact.commit_batch(options, txn, 0, [a], "h0") == 1
    assert transact.commit_batch(options, txn, 1, [b], "h1") == 1
    assert transact.commit_batch(options, txn, 1, [b], "h1") == 0  # a replay: same offsets
    # A checkpoint restored from a backup runs batch 1 over a grown source, or batch 0 again:
    # refused before anything is produced, not skipped with its rows.
    for batch_id, offsets, what in ((1, "h1+", "other source offsets"), (0, "h0", "up to 1")):
        with pytest.raises(DataLossRiskError, match=what) as refused:
            transact.commit_batch(options, txn, batch_id, [c], offsets)
        assert code_of(refused.value) == "CHECKPOINT_BEHIND_TABLE" and refused.value.fix
    assert transact.committed_marker(options, txn) == transact.Marker(1, "h1")
    # A marker of an older version (no offsets header) is judged by its batch id, as before.
    _commit_behind(options, txn, 2, ["c"])
    assert transact.commit_batch(options, txn, 2, [c], "h2") == 0
    assert broker.committed_values(options.topic) == ["a", "b", "c"]


# -- the replay check behind other producers' transactions (Apache Kafka) ---------------------


def _sink(broker: Broker, **extra: str) -> tuple[Any, str]:
    """Options of a sink with a control topic of its own (an open transaction on the shared
    one would hold up every other test), and a fresh transactional id."""
    options = parse_sink_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "topic": broker.create_topic(1),
            "lakefeed.controlTopic": f"ctl-{uuid.uuid4().hex[:8]}",
            **EOS,
            **extra,
        }
    )
    transact.ensure_control_topic(options)
    return options, f"test-{uuid.uuid4().hex[:8]}"


def _open_transaction(broker: Broker, topic: str, timeout_ms: int) -> Producer:
    """Another producer's transaction, left open on ``topic`` (aborted by the broker after
    ``timeout_ms``)."""
    other = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": f"other-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": timeout_ms,
        }
    )
    other.init_transactions(60)
    other.begin_transaction()
    other.produce(topic, key=b"other", value=b"7")
    assert other.flush(30) == 0
    return other


def _commit_behind(options: Any, txn: str, batch_id: int, values: list[str]) -> None:
    """Batch ``batch_id`` committed as the sink commits it (rows + marker, one transaction):
    what a run that crashed before Spark's commit log left behind."""
    producer = transact.BatchProducer(options, **{"transactional.id": txn}).producer
    producer.init_transactions(60)
    producer.begin_transaction()
    for value in values:
        producer.produce(options.topic, value=value.encode())
    producer.produce(options.control_topic, key=txn.encode(), value=str(batch_id).encode())
    producer.commit_transaction(60)


def _rows(*values: str) -> bytes:
    return transact.rows_to_ipc([pa.record_batch({"value": list(values)})])[0]


def test_replayed_batch_behind_an_open_transaction_is_not_produced_twice(
    apache_kafka: Broker,
) -> None:
    options, txn = _sink(apache_kafka)
    _open_transaction(apache_kafka, options.control_topic, timeout_ms=4000)
    _commit_behind(options, txn, 0, ["a", "b"])  # its marker sits behind the open transaction
    # The replay waits for the other transaction to end (aborted at its timeout), then sees
    # batch 0's marker: before, it read up to the last stable offset and produced it again.
    assert transact.commit_batch(options, txn, 0, [_rows("a", "b")]) == 0
    assert transact.commit_batch(options, txn, 1, [_rows("c")]) == 1
    assert apache_kafka.committed_values(options.topic) == ["a", "b", "c"]


def test_replay_check_refuses_while_another_transaction_stays_open(
    apache_kafka: Broker,
) -> None:
    options, txn = _sink(apache_kafka, **{"lakefeed.controlTopicWaitMs": "1500"})
    other = _open_transaction(apache_kafka, options.control_topic, timeout_ms=120_000)
    _commit_behind(options, txn, 0, ["a"])
    with pytest.raises(transact.ControlTopicBlockedError) as refused:
        transact.commit_batch(options, txn, 0, [_rows("a")])
    assert refused.value.code == "KAFKA_SINK_CONTROL_BLOCKED" and refused.value.fix
    with pytest.raises(transact.ControlTopicBlockedError):  # nor is a new batch produced
        transact.commit_batch(options, txn, 1, [_rows("b")])
    other.commit_transaction(30)
    assert transact.commit_batch(options, txn, 0, [_rows("a")]) == 0
    assert transact.commit_batch(options, txn, 1, [_rows("b")]) == 1
    assert apache_kafka.committed_values(options.topic) == ["a", "b"]


def test_broker_restart_mid_transaction_keeps_each_batch_once(apache_kafka: Any) -> None:
    options, txn = _sink(apache_kafka)
    _open_transaction(apache_kafka, options.control_topic, timeout_ms=6000)
    _commit_behind(options, txn, 0, ["a"])
    # Batch 1 is in flight (rows and marker sent, not committed) when the broker restarts.
    producer = transact.BatchProducer(options, **{"transactional.id": txn}).producer
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(options.topic, value=b"b")
    producer.produce(options.control_topic, key=txn.encode(), value=b"1")
    assert producer.flush(30) == 0
    apache_kafka.restart()
    # The restarted query replays batch 1, then batch 0 is offered again by a stale replay.
    assert transact.commit_batch(options, txn, 1, [_rows("b")]) == 1
    assert transact.commit_batch(options, txn, 0, [_rows("a")]) == 0
    assert transact.commit_batch(options, txn, 1, [_rows("b")]) == 0
    assert apache_kafka.committed_values(options.topic) == ["a", "b"]


# -- Spark: a stream into the exactly-once sink -------------------------------------------------


def _copy(
    spark: Any,
    broker: Broker,
    source: str,
    target: str,
    checkpoint: Path,
    limit: int = 20,
    fails: bool = False,
) -> Any:
    """Stream ``source`` into ``target`` exactly once, ``limit`` messages a batch, to the end;
    the query must end without an error (``fails``: with one)."""

    def start() -> Any:
        return (
            spark.readStream.format("lakefeed_kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", limit)
            .load()
            .selectExpr("key", "CAST(value AS STRING) AS value")
            .writeStream.format("lakefeed_kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", target)
            .option("lakefeed.deliveryGuarantee", "exactly-once")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    query = run_to_end(start)
    assert (query.exception() is not None) is fails, query.exception()
    return query


@on_both_brokers
def test_stream_then_replayed_batch_is_skipped(spark: Any, broker: Broker, tmp_path: Path) -> None:
    source, target = broker.create_topic(2), broker.create_topic(1)
    broker.produce(source, [f"v{i}" for i in range(60)], keys=[f"k{i}" for i in range(60)])
    checkpoint = tmp_path / "cp"
    _copy(spark, broker, source, target, checkpoint)
    expected = sorted(f"v{i}" for i in range(60))
    assert sorted(broker.committed_values(target)) == expected
    # Crash after the Kafka commit, before Spark's commit log: the last batch is run again.
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert len(commits) >= 3  # 60 messages, 20 per trigger
    for name in (str(commits[-1]), f".{commits[-1]}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    _copy(spark, broker, source, target, checkpoint)
    assert sorted(broker.committed_values(target)) == expected


def _drop_last_batch(checkpoint: Path) -> None:
    """What an operator does "to retry the last batch": delete its offsets and commit."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for folder in ("offsets", "commits"):
        for name in (str(last), f".{last}.crc"):
            (checkpoint / folder / name).unlink(missing_ok=True)


def test_a_checkpoint_behind_the_topic_is_refused_a_retried_batch_skipped(
    spark: Any, broker: Broker, tmp_path: Path
) -> None:
    source, target = broker.create_topic(1), broker.create_topic(1)
    checkpoint, backup = tmp_path / "cp", tmp_path / "backup"
    sent = [f"v{i}" for i in range(90)]
    broker.produce(source, sent[:30])
    _copy(spark, broker, source, target, checkpoint, limit=100)  # batch 0
    shutil.copytree(checkpoint, backup)
    broker.produce(source, sent[30:60])
    _copy(spark, broker, source, target, checkpoint, limit=100)  # batch 1
    # Its last batch deleted "to retry it", nothing new landed: the batch is planned again
    # over the same offsets, a replay, skipped.
    _drop_last_batch(checkpoint)
    _copy(spark, broker, source, target, checkpoint, limit=100)
    assert broker.committed_values(target) == sent[:60]
    # The backup put back while the source grew: its batch 1 covers other offsets than the
    # topic's batch 1. Refused before producing, never skipped with 30 rows.
    shutil.rmtree(checkpoint)
    shutil.copytree(backup, checkpoint)
    broker.produce(source, sent[60:])
    query = _copy(spark, broker, source, target, checkpoint, limit=100, fails=True)
    assert code_of(str(query.exception())) == "CHECKPOINT_BEHIND_TABLE"
    assert broker.committed_values(target) == sent[:60]


# -- kill -9 mid-stream -----------------------------------------------------------------------


@pytest.mark.crash
@pytest.mark.timeout(420)
def test_kill_9_mid_stream_then_restart_produces_each_row_once(
    broker: Broker, tmp_path: Path
) -> None:
    source, target = broker.create_topic(2), broker.create_topic(1)
    total = 1_500
    broker.produce(source, [f"m{i}" for i in range(total)], keys=[str(i) for i in range(total)])
    checkpoint = tmp_path / "cp"
    # Killed as soon as a batch's commit is logged: mid-stream, between two transactions.
    # (tansu does not hide aborted transactions from read_committed readers, so a kill inside
    # a transaction would show its rows here; Apache Kafka hides them. The replay of a batch
    # whose transaction committed is forced in test_stream_then_replayed_batch_is_skipped.)
    report = run_driver_with_kills(
        DRIVER,
        broker.bootstrap,
        source,
        target,
        checkpoint,
        "kafka",
        workdir=tmp_path,
        kills=1,
        kill_when=lambda _index: spark_commits(checkpoint) >= 1,
        min_delay=60.0,
        max_delay=60.0,
        final_timeout=240.0,  # its Spark start and first batch took ~90 s on a busy 2-core box
    )
    assert report.kills == 1, report
    values = broker.committed_values(target)
    assert sorted(values) == sorted(f"m{i}" for i in range(total))
