"""``lakefeed kafka produce`` / ``topics`` against the real broker (no Spark)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lakefeed.cli.main import cli
from tests.connectors.kafka.broker import Tansu
from tests.support.net import free_port


def test_produce_feeds_the_generator_at_a_rate_then_topics_shows_it(broker: Tansu) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "kafka",
            "produce",
            "cli-iot",
            "-b",
            broker.bootstrap,
            "--rate",
            "5000",
            "--total",
            "3000",
            "--partitions",
            "3",
            "--seed",
            "4",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "3000 messages acknowledged on cli-iot" in result.output
    listing = runner.invoke(cli, ["kafka", "topics", "-b", broker.bootstrap])
    assert listing.exit_code == 0, listing.output
    rows = [line for line in listing.output.splitlines() if "cli-iot" in line]
    assert len(rows) == 3
    assert sum(int(row.split("│")[5]) for row in rows) == 3000

    # The same seed gives the same messages: row 0 of seed 4 is keyed by its device id.
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cli-check"})
    consumer.assign([TopicPartition("cli-iot", p, 0) for p in range(3)])
    firsts = []
    while len(firsts) < 50:
        message = consumer.poll(10)
        assert message is not None
        if message.error() is None:
            firsts.append(message)
    consumer.close()
    pairs = [(m.key(), json.loads(m.value())) for m in firsts if m.value().endswith(b"}")]
    keyed = [(key, p["device_id"]) for key, p in pairs if isinstance(p.get("device_id"), str)]
    assert len(keyed) > 40
    assert all(key == device.encode() for key, device in keyed if device)


@pytest.mark.slow  # waits out the client's connect timeout
def test_unreachable_broker_is_a_clear_error_without_secrets() -> None:
    result = CliRunner().invoke(
        cli,
        [
            "kafka",
            "produce",
            "x",
            "-b",
            f"127.0.0.1:{free_port()}",
            "--total",
            "1",
            "-X",
            "sasl.password=cli-secret-1",
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=PLAIN",
            "-X",
            "sasl.username=u",
        ],
    )
    assert result.exit_code != 0
    assert "unreachable" in result.output
    assert "cli-secret-1" not in result.output
