"""Spark's Kafka option names, parsed and checked before any query starts (Spark-free).

Users bring code written for Spark's Kafka connector, so lakefeed accepts the same names
(``kafka.bootstrap.servers``, ``subscribe``, ``startingOffsets``, ...) and passes every other
``kafka.*`` option through to librdkafka. librdkafka is not the Java client: a few Java-only
settings are translated (``sasl.jaas.config``) or refused with the librdkafka equivalent, so that
a misconfiguration fails at ``load()`` with a message that says what to do instead of as a hung
query. Secret values (SASL/SSL passwords, keys) never appear in a ``repr`` or an error: every
message leaving this package goes through :func:`scrub`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakefeed.connectors.kafka.errors import KafkaOptionError
from lakefeed.core.options import Options
from lakefeed.core.redact import MASK, is_secret_key, redact_text

EARLIEST = -2
"""Spark's per-partition code for "earliest" in offset JSON."""
LATEST = -1
"""Spark's per-partition code for "latest" in offset JSON."""

TopicPartition = tuple[str, int]
OffsetMap = dict[TopicPartition, int]


# Java-only client settings and what librdkafka wants instead.
_JAVA_ONLY = {
    "ssl.truststore.location": "kafka.ssl.ca.location (a PEM file)",
    "ssl.truststore.password": "kafka.ssl.ca.location (a PEM file needs no password)",
    "ssl.truststore.type": "kafka.ssl.ca.location (a PEM file)",
    "ssl.keystore.location": "kafka.ssl.certificate.location and kafka.ssl.key.location (PEM)",
    "ssl.keystore.type": "kafka.ssl.certificate.location and kafka.ssl.key.location (PEM)",
    "ssl.keystore.password": "kafka.ssl.key.password",
}
# Consumer/producer settings lakefeed owns (Spark refuses the same ones).
_OWNED = {
    "group.id": "kafka.group.id is accepted; plain group.id is not a Spark option",
    "auto.offset.reset": "use startingOffsets (offsets live in Spark's checkpoint)",
    "enable.auto.commit": "offsets live in Spark's checkpoint, never in Kafka",
    "key.deserializer": "keys are always read as binary: cast or parse the key column",
    "value.deserializer": "values are always read as binary: cast or parse the value column",
    "key.serializer": "write a string or binary key column",
    "value.serializer": "write a string or binary value column",
    "interceptor.classes": "interceptors are a Java client feature",
}
_JAAS = re.compile(
    r"""(?P<module>[\w.]+)\s+required(?P<args>(?:\s+\w+\s*=\s*"[^"]*")*)\s*;?\s*$""", re.DOTALL
)
_JAAS_ARG = re.compile(r"""(\w+)\s*=\s*"([^"]*)\"""")


def secret_values(config: Mapping[str, str]) -> list[str]:
    """The values of secret-named settings, longest first (for scrubbing free text)."""
    values = {str(v) for k, v in config.items() if is_secret_key(k) and v}
    return sorted(values, key=len, reverse=True)


def scrub(text: str, config: Mapping[str, str] | None = None) -> str:
    """Remove every secret value of ``config`` from ``text``, then mask ``password=...`` pairs."""
    for value in secret_values(config or {}):
        if len(value) >= 3:
            text = text.replace(value, MASK)
    return redact_text(text)


def _translate_jaas(value: str) -> dict[str, str]:
    """``sasl.jaas.config`` (Java) → librdkafka ``sasl.username``/``sasl.password``."""
    match = _JAAS.match(value.strip())
    if match is None:
        raise KafkaOptionError(
            "kafka.sasl.jaas.config is not a JAAS login line this connector understands; "
            "set kafka.sasl.username and kafka.sasl.password instead"
        )
    module = match.group("module").rsplit(".", 1)[-1]
    args = dict(_JAAS_ARG.findall(match.group("args")))
    if module not in ("PlainLoginModule", "ScramLoginModule") or not {
        "username",
        "password",
    } <= set(args):
        raise KafkaOptionError(
            f"kafka.sasl.jaas.config with {module}: only PlainLoginModule/ScramLoginModule with "
            "username and password are translated; for OAUTHBEARER or GSSAPI set librdkafka's "
            "kafka.sasl.oauthbearer.* or kafka.sasl.kerberos.* options"
        )
    return {"sasl.username": args["username"], "sasl.password": args["password"]}


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings from the ``kafka.*`` options (keys already lower-cased)."""
    config: dict[str, str] = {}
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name in _JAVA_ONLY:
            raise KafkaOptionError(
                f"kafka.{name} is a Java client setting; librdkafka needs {_JAVA_ONLY[name]}"
            )
        if name in _OWNED and name != "group.id":
            raise KafkaOptionError(f"kafka.{name} is not supported: {_OWNED[name]}")
        if name == "sasl.jaas.config":
            config.update(_translate_jaas(value))
        else:
            config[name] = value
    if not config.get("bootstrap.servers", "").strip():
        raise KafkaOptionError(
            "option kafka.bootstrap.servers is required, e.g. "
            '.option("kafka.bootstrap.servers", "host1:9092,host2:9092")'
        )
    return config


def _refuse_unknown(options: Mapping[str, str], known: frozenset[str], role: str) -> None:
    for key in options:
        if key.startswith("kafka.") or key in known:
            continue
        if key in _OWNED:
            raise KafkaOptionError(f"option {key} is not supported: {_OWNED[key]}")
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
        hint = f" Did you mean {_SPARK_SPELLING.get(close[0], close[0])}?" if close else ""
        raise KafkaOptionError(
            f"unknown Kafka {role} option {key!r}.{hint} "
            "Client settings go through as kafka.<librdkafka setting>."
        )


def _offset_json(name: str, raw: str, *, times: bool = False) -> OffsetMap:
    """``{"topic": {"0": n}}``: offsets (-2 earliest, -1 latest) or, with ``times``, ms >= 0."""
    example = (
        '{"topicA": {"0": 1700000000000, "1": 1700000000000}} (ms since the epoch)'
        if times
        else '{"topicA": {"0": 23, "1": -2}} (-2 = earliest, -1 = latest)'
    )
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        accepted = "JSON like " if times else "earliest, latest or JSON like "
        raise KafkaOptionError(f"option {name} must be {accepted}{example}, got {raw!r}")
    lowest = 0 if times else EARLIEST
    result: OffsetMap = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise KafkaOptionError(f"option {name}: topic {topic!r} needs {{partition: value}}")
        for partition, value in partitions.items():
            if not str(partition).isdigit() or type(value) is not int or value < lowest:
                what = "a timestamp in ms >= 0" if times else "an offset"
                raise KafkaOptionError(
                    f"option {name}: {topic}[{partition}] = {value!r} is not {what}; "
                    f"expected JSON like {example}"
                )
            result[(str(topic), int(partition))] = value
    return result


@dataclass(frozen=True)
class Timestamps:
    """Offsets given as times (ms since the epoch): per partition, the first offset whose
    timestamp is at or after the time (Kafka's offsetsForTimes)."""

    option: str
    """The option they came from (named in every message about them)."""
    every: int | None = None
    """One time for every partition read (``startingTimestamp``/``endingTimestamp``)."""
    by_partition: OffsetMap = field(default_factory=dict)


def _timestamps(options: Mapping[str, str], prefix: str) -> Timestamps | None:
    """``<prefix>Timestamp`` wins over ``<prefix>OffsetsByTimestamp`` (Spark's precedence)."""
    every = f"{prefix}Timestamp"
    raw = options.get(every.lower())
    if raw is not None:
        if not raw.strip().isdigit():
            raise KafkaOptionError(
                f"option {every} must be a time in ms since the epoch (an integer >= 0), "
                f"got {raw!r}"
            )
        return Timestamps(every, every=int(raw))
    by_partition = f"{prefix}OffsetsByTimestamp"
    raw = options.get(by_partition.lower())
    if raw is None:
        return None
    return Timestamps(by_partition, by_partition=_offset_json(by_partition, raw, times=True))


@dataclass(frozen=True)
class Subscription:
    """What to read: ``subscribe`` (topic list), ``subscribePattern`` (regex) or ``assign``."""

    kind: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def wants(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None and not topic.startswith("__")
        return any(t == topic for t, _ in self.assigned)

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assigned)


def _subscription(options: Options) -> Subscription:
    given = [k for k in ("subscribe", "subscribepattern", "assign") if options.get(k)]
    if len(given) != 1:
        found = ", ".join(_SPARK_SPELLING[k] for k in given) or "none"
        raise KafkaOptionError(
            "exactly one of subscribe, subscribePattern or assign is required "
            f'(found: {found}), e.g. .option("subscribe", "topicA,topicB")'
        )
    kind = given[0]
    raw = options[kind]
    if kind == "subscribe":
        topics = tuple(options.names_list("subscribe"))
        if not topics:
            raise KafkaOptionError(f"option subscribe lists no topic: {raw!r}")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        try:
            re.compile(raw)
        except re.error as exc:
            raise KafkaOptionError(
                f"option subscribePattern is not a regex ({exc}): {raw!r}"
            ) from None
        return Subscription("subscribePattern", pattern=raw)
    try:
        parsed = json.loads(raw)
        assigned = tuple(
            sorted((str(t), int(p)) for t, parts in parsed.items() for p in parts if int(p) >= 0)
        )
    except (ValueError, TypeError, AttributeError):
        assigned = ()
    if not assigned:
        raise KafkaOptionError(
            f'option assign must be JSON like {{"topicA": [0, 1], "topicB": [2]}}, got {raw!r}'
        )
    return Subscription("assign", assigned=assigned)


Position = str | OffsetMap | Timestamps
"""Where a read starts or ends: earliest/latest, per-partition offsets or times."""


def _starting(options: Mapping[str, str], batch: bool | None) -> Position:
    times = _timestamps(options, "starting")
    if times is not None:  # startingTimestamp > startingOffsetsByTimestamp > startingOffsets
        return times
    raw = options.get("startingoffsets", "earliest" if batch else "latest").strip()
    if raw.lower() in ("earliest", "latest"):
        if batch and raw.lower() == "latest":
            raise KafkaOptionError(
                "startingOffsets=latest is not allowed for a batch read (it would read "
                "nothing); use earliest or per-partition JSON"
            )
        return raw.lower()
    offsets = _offset_json("startingOffsets", raw)
    if batch and LATEST in offsets.values():
        raise KafkaOptionError("startingOffsets: -1 (latest) is not allowed for a batch read")
    return offsets


def _ending(options: Mapping[str, str], batch: bool | None) -> Position:
    times = _timestamps(options, "ending")
    raw = options.get("endingoffsets")
    if times is None and raw is None:
        return "latest"
    if batch is False:
        given = times.option if times is not None else "endingOffsets"
        raise KafkaOptionError(
            f"{given} only applies to batch reads (spark.read); a stream has no end. "
            "Use trigger(availableNow=True) to stop at the offsets available at start"
        )
    if times is not None:  # endingTimestamp > endingOffsetsByTimestamp > endingOffsets
        return times
    assert raw is not None
    raw = raw.strip()
    if raw.lower() == "latest":
        return "latest"
    if raw.lower() == "earliest":
        raise KafkaOptionError("endingOffsets=earliest is not allowed (it would read nothing)")
    offsets = _offset_json("endingOffsets", raw)
    if EARLIEST in offsets.values():
        raise KafkaOptionError("endingOffsets: -2 (earliest) is not allowed; use -1 or a number")
    return offsets


def _check_times(starting: Position, ending: Position) -> None:
    """One time for all partitions at both ends: the end must come after the start."""
    if not (isinstance(starting, Timestamps) and isinstance(ending, Timestamps)):
        return
    if starting.every is not None and ending.every is not None and ending.every <= starting.every:
        raise KafkaOptionError(
            f"endingTimestamp ({ending.every}) must be after startingTimestamp "
            f"({starting.every}); the read would be empty"
        )


_STRATEGIES = {
    "error": "fail when a partition has no offset at or after the time",
    "latest": "start such a partition at the latest offset",
}
_SOURCE_OPTIONS = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingOffsetsByTimestamp",
    "startingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingOffsetsByTimestamp",
    "endingTimestamp",
    "maxOffsetsPerTrigger",
    "minPartitions",
    "maxRecordsPerPartition",
    "failOnDataLoss",
    "includeHeaders",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "fetchOffset.timeoutMs",
    "groupIdPrefix",
)
# queryName: Spark hands a query's name to its sink as an option.
_SINK_OPTIONS = (
    "topic",
    "checkpointLocation",
    "path",
    "queryName",
    "producer.flushTimeoutMs",
    "lakefeed.deliveryGuarantee",
    "lakefeed.transactionalIdPrefix",
    "lakefeed.controlTopic",
    "lakefeed.controlTopicWaitMs",
)
_SPARK_SPELLING = {name.lower(): name for name in _SOURCE_OPTIONS + _SINK_OPTIONS}


@dataclass(frozen=True)
class SourceOptions:
    """A validated Kafka source configuration. ``repr`` never shows secrets."""

    client: dict[str, str] = field(repr=False)
    subscription: Subscription
    starting: Position
    ending: Position
    timestamp_strategy: str
    """startingOffsetsByTimestampStrategy: ``error`` or ``latest``."""
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_s: float
    metadata_timeout_s: float
    metadata_retries: int
    retry_interval_s: float
    group_id: str

    @property
    def bootstrap_servers(self) -> str:
        return self.client["bootstrap.servers"]

    def scrub(self, text: str) -> str:
        return scrub(text, self.client)


def parse_source_options(options: Mapping[str, Any], *, batch: bool | None) -> SourceOptions:
    """Validate Spark-style source options; raise :class:`KafkaOptionError` on misuse.

    ``batch`` is None when it is not known yet whether the read is a batch or a stream
    (``DataSource.schema()``): only the rules common to both are checked then.
    """
    opts = Options(options, KafkaOptionError)
    try:
        _refuse_unknown(opts, frozenset(o.lower() for o in _SOURCE_OPTIONS), "source")
        client = client_config(opts)
        retries = opts.non_negative_int("fetchOffset.numRetries")
        starting, ending = _starting(opts, batch), _ending(opts, batch)
        _check_times(starting, ending)
        return SourceOptions(
            client=client,
            subscription=_subscription(opts),
            starting=starting,
            ending=ending,
            timestamp_strategy=opts.choice(
                "startingOffsetsByTimestampStrategy", _STRATEGIES, "error"
            ),
            max_offsets_per_trigger=opts.positive_int("maxOffsetsPerTrigger"),
            min_partitions=opts.positive_int("minPartitions"),
            max_records_per_partition=opts.positive_int("maxRecordsPerPartition"),
            fail_on_data_loss=opts.flag("failOnDataLoss", True),
            include_headers=opts.flag("includeHeaders", False),
            poll_timeout_s=_seconds(opts, "kafkaConsumer.pollTimeoutMs", 60_000),
            metadata_timeout_s=_seconds(opts, "fetchOffset.timeoutMs", 5_000),
            metadata_retries=3 if retries is None else retries,
            retry_interval_s=_seconds(opts, "fetchOffset.retryIntervalMs", 1_000),
            group_id=opts.get("kafka.group.id")
            or opts.get("groupIdPrefix", "lakefeed-kafka-source"),
        )
    except KafkaOptionError as exc:
        raise _scrubbed(exc, opts) from None


def _seconds(opts: Options, name: str, default_ms: int) -> float:
    return (opts.positive_int(name) or default_ms) / 1000


def _scrubbed(error: KafkaOptionError, opts: Options) -> KafkaOptionError:
    """The same error with every secret value of the options masked."""
    fix = scrub(error.fix, opts) if error.fix else None
    return KafkaOptionError(scrub(error.message, opts), fix=fix)


EXACTLY_ONCE = "exactly-once"
_GUARANTEES = {
    "at-least-once": "each task produces its rows; a replayed batch is sent again (default)",
    EXACTLY_ONCE: "the driver produces each micro-batch in one Kafka transaction, once",
}
CONTROL_TOPIC = "_lakefeed_kafka_sink_commits"
"""Default compacted topic of the exactly-once sink's markers (sink → last committed batch)."""
# Producer settings a transaction needs; the exactly-once sink refuses anything else.
_TRANSACTION_NEEDS = {"enable.idempotence": ("true",), "acks": ("all", "-1")}


@dataclass(frozen=True)
class SinkOptions:
    """A validated Kafka sink configuration. ``repr`` never shows secrets."""

    client: dict[str, str] = field(repr=False)
    topic: str | None
    flush_timeout_s: float
    exactly_once: bool = False
    """lakefeed.deliveryGuarantee=exactly-once: one transaction per micro-batch."""
    transactional_id_prefix: str = "lakefeed-"
    control_topic: str = CONTROL_TOPIC
    control_wait_s: float = 120.0
    """lakefeed.controlTopicWaitMs: how long the replay check waits for other producers'
    transactions open on the control topic (their markers hide ours until they end)."""
    checkpoint: str | None = None

    def scrub(self, text: str) -> str:
        return scrub(text, self.client)


def _check_transactional(client: Mapping[str, str]) -> None:
    """Settings that would contradict the exactly-once sink's transactions, refused."""
    if "transactional.id" in client:
        raise KafkaOptionError(
            "kafka.transactional.id is set by the exactly-once sink (prefix + the query id, "
            "stable across restarts); set lakefeed.transactionalIdPrefix instead"
        )
    for name, allowed in _TRANSACTION_NEEDS.items():
        value = client.get(name)
        if value is not None and value.strip().lower() not in allowed:
            raise KafkaOptionError(
                f"kafka.{name}={value} contradicts lakefeed.deliveryGuarantee=exactly-once "
                f"(Kafka transactions need {name}={allowed[0]}); remove the option"
            )


def parse_sink_options(options: Mapping[str, Any]) -> SinkOptions:
    """Validate Spark-style sink options; raise :class:`KafkaOptionError` on misuse."""
    opts = Options(options, KafkaOptionError)
    try:
        _refuse_unknown(opts, frozenset(o.lower() for o in _SINK_OPTIONS), "sink")
        client = client_config(opts)
        exactly_once = (
            opts.choice("lakefeed.deliveryGuarantee", _GUARANTEES, "at-least-once") == EXACTLY_ONCE
        )
        if exactly_once:
            _check_transactional(client)
        return SinkOptions(
            client=client,
            topic=opts.get("topic") or None,
            flush_timeout_s=_seconds(opts, "producer.flushTimeoutMs", 60_000),
            exactly_once=exactly_once,
            transactional_id_prefix=opts.get("lakefeed.transactionalIdPrefix", "lakefeed-"),
            control_topic=opts.get("lakefeed.controlTopic") or CONTROL_TOPIC,
            control_wait_s=_seconds(opts, "lakefeed.controlTopicWaitMs", 120_000),
            checkpoint=opts.get("checkpointLocation") or None,
        )
    except KafkaOptionError as exc:
        raise _scrubbed(exc, opts) from None
