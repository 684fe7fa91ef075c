"""Option parsing: Spark's names, clear refusals, secrets never shown (no broker, no Spark)."""

from __future__ import annotations

import pytest

from lakefeed.connectors.kafka.options import (
    EARLIEST,
    LATEST,
    KafkaOptionError,
    parse_sink_options,
    parse_source_options,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a"}


def test_spark_names_case_insensitive_and_defaults() -> None:
    options = parse_source_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "Subscribe": "a, b",
            "maxoffsetspertrigger": "100",
            "MINPARTITIONS": "4",
            "includeHeaders": "TRUE",
            "kafka.fetch.min.bytes": "1",
        },
        batch=False,
    )
    assert options.subscription.topics == ("a", "b")
    assert options.starting == "latest"  # stream default, like Spark
    assert options.max_offsets_per_trigger == 100
    assert options.min_partitions == 4
    assert options.include_headers is True
    assert options.fail_on_data_loss is True
    assert options.client == {"bootstrap.servers": "h:1", "fetch.min.bytes": "1"}
    assert parse_source_options(BASE, batch=True).starting == "earliest"  # batch default


def test_offsets_json_pattern_and_assign() -> None:
    options = parse_source_options(
        {**BASE, "startingOffsets": '{"a": {"0": 5, "1": -2, "2": -1}}'}, batch=False
    )
    assert options.starting == {("a", 0): 5, ("a", 1): EARLIEST, ("a", 2): LATEST}
    pattern = parse_source_options(
        {"kafka.bootstrap.servers": "h:1", "subscribePattern": "ev.*"}, batch=False
    ).subscription
    assert pattern.wants("events") and not pattern.wants("other") and not pattern.wants("__x")
    assign = parse_source_options(
        {"kafka.bootstrap.servers": "h:1", "assign": '{"a": [1, 0], "b": [2]}'}, batch=False
    ).subscription
    assert assign.assigned == (("a", 0), ("a", 1), ("b", 2))
    assert assign.wants("b") and not assign.wants("c")


@pytest.mark.parametrize(
    ("options", "batch", "message"),
    [
        ({"subscribe": "a"}, False, "kafka.bootstrap.servers is required"),
        ({"kafka.bootstrap.servers": "h:1"}, False, "exactly one of subscribe"),
        ({**BASE, "assign": '{"a": [0]}'}, False, "found: subscribe, assign"),
        ({**BASE, "startingOffset": "earliest"}, False, "Did you mean startingOffsets?"),
        ({**BASE, "startingOffsets": "newest"}, False, "earliest, latest or JSON"),
        ({**BASE, "startingOffsets": '{"a": {"0": -3}}'}, False, "is not an offset"),
        ({**BASE, "startingOffsets": "latest"}, True, "not allowed for a batch read"),
        ({**BASE, "endingOffsets": "latest"}, False, "only applies to batch reads"),
        ({**BASE, "endingOffsets": '{"a": {"0": -2}}'}, True, "-2 (earliest) is not allowed"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, False, "maxOffsetsPerTrigger must be a positive"),
        ({**BASE, "minPartitions": "x"}, False, "minPartitions must be a positive"),
        ({**BASE, "failOnDataLoss": "maybe"}, False, "failOnDataLoss must be true or false"),
        ({**BASE, "kafka.auto.offset.reset": "earliest"}, False, "use startingOffsets"),
        ({**BASE, "kafka.enable.auto.commit": "true"}, False, "checkpoint"),
        ({**BASE, "kafka.ssl.truststore.location": "/x.jks"}, False, "kafka.ssl.ca.location"),
        ({**BASE, "subscribePattern": "("}, False, "exactly one"),
        ({"kafka.bootstrap.servers": "h", "subscribePattern": "("}, False, "not a regex"),
        ({"kafka.bootstrap.servers": "h", "assign": "[0]"}, False, "assign must be JSON"),
    ],
)
def test_misuse_is_refused_with_a_fix(options: dict, batch: bool, message: str) -> None:
    with pytest.raises(KafkaOptionError) as info:
        parse_source_options(options, batch=batch)
    assert message in str(info.value)


def test_jaas_config_becomes_librdkafka_sasl_and_secrets_never_show() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="s3cr3t-pw";'
    )
    options = parse_source_options(
        {**BASE, "kafka.sasl.jaas.config": jaas, "kafka.sasl.mechanism": "PLAIN"}, batch=False
    )
    assert options.client["sasl.username"] == "alice"
    assert options.client["sasl.password"] == "s3cr3t-pw"
    assert "s3cr3t-pw" not in repr(options)
    assert (
        options.scrub("failed with password s3cr3t-pw inside") == "failed with password *** inside"
    )


def test_errors_never_echo_secret_values() -> None:
    secret = "hunter2-value"
    with pytest.raises(KafkaOptionError) as info:
        parse_source_options(
            {**BASE, "kafka.sasl.password": secret, "bogusOption": secret}, batch=False
        )
    assert secret not in str(info.value)
    with pytest.raises(KafkaOptionError) as info:
        parse_source_options(
            {**BASE, "kafka.sasl.jaas.config": f'Foo required password="{secret}";'}, batch=False
        )
    assert secret not in str(info.value)


def test_sink_options() -> None:
    sink = parse_sink_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "out", "checkpointLocation": "/c"}
    )
    assert sink.topic == "out" and sink.client == {"bootstrap.servers": "h:1"}
    with pytest.raises(KafkaOptionError, match="Did you mean topic"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "topics": "out"})
    with pytest.raises(KafkaOptionError, match="write a string or binary value column"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"})


def test_read_kafka_option_spelling() -> None:
    from lakefeed.connectors.kafka import _option_name, _option_value

    assert _option_name("max_offsets_per_trigger") == "maxOffsetsPerTrigger"
    assert _option_name("startingOffsets") == "startingOffsets"
    assert _option_name("kafka.security.protocol") == "kafka.security.protocol"
    assert _option_value(True) == "true"
    assert _option_value({"a": {"0": 1}}) == '{"a": {"0": 1}}'


def test_scram_jaas_and_unsupported_login_modules() -> None:
    scram = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="pw-123";'
    )
    options = parse_source_options({**BASE, "kafka.sasl.jaas.config": scram}, batch=False)
    assert (options.client["sasl.username"], options.client["sasl.password"]) == ("bob", "pw-123")
    with pytest.raises(KafkaOptionError, match="OAUTHBEARER or GSSAPI"):
        parse_source_options(
            {
                **BASE,
                "kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule "
                'required useKeyTab="true";',
            },
            batch=False,
        )
