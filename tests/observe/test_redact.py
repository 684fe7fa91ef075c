"""Redaction by meaning: secret option values and URL passwords go, names of things stay."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakefeed.core.redact import MASK, is_secret_key, redact, redact_text
from lakefeed.observe.figures import Monitor
from lakefeed.runtime.event_log import EventLog, read_events
from tests.observe.progress import progress

PW = "hunter2-Xy9"


@pytest.mark.parametrize(
    "key",
    [
        "kafka.sasl.jaas.config",
        "kafka.sasl.password",
        "sasl.password",
        "ssl.key.password",
        "kafka.ssl.keystore.password",
        "fs.s3a.secret.key",
        "aws_secret_access_key",
        "secretAccessKey",
        "AWS_SESSION_TOKEN",
        "client_secret",
        "sasl.oauthbearer.client.secret",
        "password",
        "token",
        "api_key",
        "x-api-key",
        "azure.storage.account.key",
        "ssl.key.pem",
    ],
)
def test_secret_bearing_option_names(key):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "secret-topic",
        "bronze_secret",
        "secret_readings",
        "token_counts",
        "password_resets",
        "fs.s3a.access.key",
        "kafka.bootstrap.servers",
        "ssl.key.location",
        "subscribe",
        "has_token",
    ],
)
def test_names_that_only_contain_a_secret_word_are_not_secret(key):
    assert not is_secret_key(key)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"postgresql://etl:{PW}@db.local:5432/lake", "postgresql://etl:***@db.local:5432/lake"),
        (f"jdbc:postgresql://db/lake?user=etl&password={PW}&ssl=true", "user=etl&password=***&"),
        (
            "kafka.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required username="etl" password="{PW}";',
            'username="etl" password="***"',
        ),
        (f'{{"kafka.sasl.password": "{PW}", "subscribe": "t"}}', '"subscribe": "t"'),
        (f"Map(kafka.ssl.key.password -> {PW}, subscribe -> t)", "subscribe -> t"),
        (f"Authorization: Bearer {PW}", "Bearer ***"),
        (f"s3://AKIA:{PW}@bucket/path", "s3://AKIA:***@bucket/path"),
        (
            "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
            f"SharedAccessKey={PW}=;EntityPath=events",
            "SharedAccessKeyName=Root;SharedAccessKey=***;EntityPath=events",
        ),
        (f"DefaultEndpointsProtocol=https;AccountName=lake;AccountKey={PW}==", "AccountKey=***"),
    ],
)
def test_secret_values_in_free_text_are_masked(text, kept):
    redacted = redact_text(text)
    assert PW not in redacted
    assert kept in redacted


@pytest.mark.parametrize(
    "text",
    [
        "bronze_secret: restarting after failure (attempt 2)",
        "table bronze_secret output mode: append",
        "secret-topic: 3 partitions, offsets {0: 17}",
        'KafkaV2[Subscribe[secret-topic]] {"secret-topic": {"0": 5}}',
    ],
)
def test_names_in_free_text_are_kept(text):
    assert redact_text(text) == text


def test_maps_keyed_by_names_keep_their_values():
    details = {
        "output_modes": {"bronze_secret": "append", "token": "complete"},
        "endOffset": {"secret-topic": {"0": 5}},
        "options": {"subscribe": "secret-topic", "kafka.sasl.jaas.config": f'password="{PW}"'},
    }
    redacted = redact(details)
    assert redacted["output_modes"]["bronze_secret"] == "append"
    assert redacted["endOffset"] == {"secret-topic": {"0": 5}}
    assert redacted["options"] == {"subscribe": "secret-topic", "kafka.sasl.jaas.config": MASK}


def test_a_secret_named_topic_keeps_offsets_and_lag_through_the_event_log(tmp_path):
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    source = {
        "description": "PythonMicroBatchStream[lakefeed_kafka]",
        "startOffset": {"secret-topic": {"0": 10}},
        "endOffset": {"secret-topic": {"0": 40}},
        "latestOffset": {"secret-topic": {"0": 50}},
        "numInputRows": 30,
    }
    with EventLog(tmp_path / "log", "p", flush_interval=60) as log:
        log.emit("flow_start", "bronze_secret started", flow="bronze_secret")
        log.emit(
            "flow_progress",
            "batch",
            flow="bronze_secret",
            details=progress(0, at, rows=30, sources=[source]),
        )
        log.emit("flow_restart", "bronze_secret: restarting (attempt 1)", flow="bronze_secret")
    events = read_events(tmp_path / "log")
    assert events[1]["details"]["sources"][0]["endOffset"] == {"secret-topic": {"0": 40}}
    assert events[2]["message"] == "bronze_secret: restarting (attempt 1)"
    monitor = Monitor()
    monitor.apply_all(events)
    (flow,) = monitor.flows()
    assert flow.last is not None and flow.last.kafka_lag == 10


def test_a_jaas_line_inside_json_text_is_masked():
    text = (
        '{"kafka.sasl.mechanism": "PLAIN", "note": "sasl.jaas.config=x required '
        f'username=\\"etl\\" password=\\"{PW}\\";", "error": "failed: password={PW}"}}'
    )
    redacted = redact_text(text)
    assert PW not in redacted
    assert '"kafka.sasl.mechanism": "PLAIN"' in redacted
