"""The driver's view of the brokers: partitions and watermarks, with bounded waits (Spark-free).

Every broker call has a timeout, so a wrong ``kafka.bootstrap.servers`` fails a query within
seconds, and errors are translated into messages that name the option to check, with secrets
scrubbed.

Latest offsets: ListOffsets(LATEST) is the high watermark on Apache Kafka, but some
Kafka-protocol brokers (tansu) answer with the start of the newest produce batch + 1 instead. The
high watermark inside a Fetch response is right on every broker, so the latest offset is the
larger of ListOffsets and a one-message fetch at the end of each non-empty partition. On Apache
Kafka both agree and the fetch costs one round trip per micro-batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from lakefeed.connectors.base import Reached
from lakefeed.connectors.kafka.errors import (
    DataLossError as DataLossError,  # importable here as before
)
from lakefeed.connectors.kafka.errors import KafkaSourceError, KafkaUnavailableError
from lakefeed.connectors.kafka.offsets import TopicIds, Watermarks
from lakefeed.connectors.kafka.options import (
    KafkaOptionError,
    SourceOptions,
    TopicPartition,
    parse_source_options,
)
from lakefeed.core.explain import explain

LIBRDKAFKA_LOG = logging.getLogger("lakefeed.kafka.librdkafka")
"""librdkafka's own log lines (connection failures, ...) go here instead of raw stderr."""


class _Repeats(logging.Filter):
    """Let one copy of a repeated librdkafka line through per ``window`` seconds.

    librdkafka logs every reconnect attempt (every few ms while a broker is down).
    """

    def __init__(self, window: float = 30.0) -> None:
        super().__init__()
        self.window = window
        self.seen: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        key = record.getMessage()
        if now - self.seen.get(key, -self.window) < self.window:
            return False
        if len(self.seen) > 1000:
            self.seen.clear()
        self.seen[key] = now
        return True


LIBRDKAFKA_LOG.addFilter(_Repeats())

T = TypeVar("T")


def data_loss_message(problems: Iterable[str]) -> str:
    return (
        "Kafka data loss: "
        + "; ".join(problems)
        + ". Some data may have been lost. If you want the query to carry on (skipping what is "
        "gone, with a warning), set option failOnDataLoss to false."
    )


def consumer_config(options: SourceOptions, **overrides: Any) -> dict[str, Any]:
    """librdkafka consumer settings: the user's ``kafka.*`` plus what lakefeed must own."""
    return {
        # Spark's (Java client) default; librdkafka alone would default to read_committed.
        "isolation.level": "read_uncommitted",
        **options.client,
        "group.id": options.group_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "logger": LIBRDKAFKA_LOG,
        **overrides,
    }


def make_consumer(options: SourceOptions, **overrides: Any) -> Consumer:
    try:
        return Consumer(consumer_config(options, **overrides))
    except (KafkaException, ValueError, TypeError) as exc:
        raise KafkaOptionError(
            options.scrub(
                f"invalid Kafka client option: {_reason(exc)} (check the kafka.* options)"
            )
        ) from None


def _code(exc: KafkaException) -> int | None:
    error = exc.args[0] if exc.args else None
    return error.code() if isinstance(error, KafkaError) else None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].str())
    return str(exc)


class BrokerView:
    """Long-lived driver-side client: lists partitions, reads watermarks. Not picklable state."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._metadata: Consumer | None = None
        self._fetcher: Consumer | None = None
        self._admin: AdminClient | None = None
        self._reached = False
        # Partitions whose high watermark the last watermarks() call could not confirm by a
        # fetch: the offset request's answer is then all there is (low on tansu, see above).
        self.unconfirmed: frozenset[TopicPartition] = frozenset()

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    def close(self) -> None:
        for consumer in (self._metadata, self._fetcher):
            if consumer is not None:
                consumer.close()
        self._metadata = self._fetcher = None
        self._admin = None

    # -- broker calls ------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` with retries once the brokers have answered before; fail fast otherwise."""
        retries = self.options.metadata_retries if self._reached else 0
        for attempt in range(retries + 1):
            try:
                result = fn()
                self._reached = True
                return result
            except KafkaException as exc:
                reason = _reason(exc)
                if attempt < retries:
                    LIBRDKAFKA_LOG.warning(
                        "Kafka %s failed (%s); retry %d of %d", what, reason, attempt + 1, retries
                    )
                    time.sleep(self.options.retry_interval_s)
        raise KafkaUnavailableError(
            self.options.scrub(
                f"Kafka {what} failed: {reason} (brokers {self.options.bootstrap_servers}, "
                f"waited {self.options.metadata_timeout_s:g} s"
                + (f" x {retries + 1} attempts" if retries else "")
                + "). Check kafka.bootstrap.servers, that the brokers are up and reachable, "
                "and kafka.security.protocol/kafka.sasl.* settings."
            )
        )

    def _consumer(self) -> Consumer:
        if self._metadata is None:
            self._metadata = make_consumer(self.options)
        return self._metadata

    def _fetch_consumer(self) -> Consumer:
        """A consumer for a few messages at a time, answering fast (no long-poll, no back-off)."""
        if self._fetcher is None:
            self._fetcher = make_consumer(
                self.options,
                **{"queued.min.messages": 1, "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10},
            )
        return self._fetcher

    def partitions(self) -> list[TopicPartition]:
        """Partitions the subscription covers right now (new topics/partitions included)."""
        timeout = self.options.metadata_timeout_s
        consumer = self._consumer()
        metadata = self._call("metadata request", lambda: consumer.list_topics(timeout=timeout))
        subscription = self.options.subscription
        found = [
            (name, partition)
            for name, topic in metadata.topics.items()
            if topic.error is None and subscription.wants(name)
            for partition in topic.partitions
        ]
        if subscription.kind == "assign":
            found = [tp for tp in found if tp in subscription.assigned]
        return sorted(found)

    def topic_ids(self, topics: Iterable[str]) -> TopicIds:
        """Each topic's id: a recreated topic gets a new one. Topics the brokers do not know
        (deleted meanwhile) or give no id (brokers before Kafka 2.8) are left out."""
        names = sorted(set(topics))
        if not names:
            return {}
        if self._admin is None:
            # log_level 3: consumer-only kafka.* settings would each log a CONFWARN here.
            settings = {**self.options.client, "log_level": 3, "logger": LIBRDKAFKA_LOG}
            self._admin = AdminClient(settings)  # type: ignore[arg-type]
        admin, timeout = self._admin, self.options.metadata_timeout_s

        def ask() -> TopicIds:
            futures = admin.describe_topics(TopicCollection(names), request_timeout=timeout)
            ids: TopicIds = {}
            for name, future in futures.items():
                try:
                    topic_id = str(future.result(timeout=timeout + 5).topic_id or "")
                except KafkaException as exc:
                    if _code(exc) != KafkaError.UNKNOWN_TOPIC_OR_PART:
                        raise
                    continue
                if topic_id.strip("A="):  # the all-zero id: none given
                    ids[name] = topic_id
            return ids

        return self._call("describe-topics request", ask)

    def watermarks(
        self, partitions: Iterable[TopicPartition], *, exact_high: bool = True
    ) -> Watermarks:
        """(low, high) for each partition; ``exact_high`` corrects high by a fetch (see above)."""
        timeout = self.options.metadata_timeout_s
        consumer = self._consumer()
        result: Watermarks = {}
        for topic, partition in partitions:
            request = KafkaTopicPartition(topic, partition)

            def ask(request: KafkaTopicPartition = request) -> tuple[int, int]:
                return consumer.get_watermark_offsets(request, timeout=timeout, cached=False)

            result[(topic, partition)] = self._call("offset request", ask)
        fetched = self._fetched_highs(result) if exact_high else {}
        self.unconfirmed = frozenset(
            tp for tp, (low, high) in result.items() if exact_high and high > low
        ) - set(fetched)
        for key, fetched_high in fetched.items():
            low, high = result[key]
            result[key] = (low, max(high, fetched_high))
        return result

    def _fetched_highs(self, watermarks: Watermarks) -> dict[TopicPartition, int]:
        """High watermarks seen in Fetch responses at the end of each non-empty partition."""
        wanted = {tp: max(high - 1, low) for tp, (low, high) in watermarks.items() if high > low}
        if not wanted:
            return {}
        fetcher = self._fetch_consumer()
        # assign() replaces the previous assignment and drops what it had queued; an
        # unassign() in between would make the next fetch wait out a 1 s back-off.
        fetcher.assign([KafkaTopicPartition(t, p, offset) for (t, p), offset in wanted.items()])
        pending = set(wanted)
        deadline = time.monotonic() + self.options.metadata_timeout_s
        while pending and time.monotonic() < deadline:
            for message in fetcher.consume(num_messages=1000, timeout=0.05):
                if message.error() is None:
                    pending.discard((message.topic(), message.partition()))
        highs = {}
        for topic, partition in set(wanted) - pending:
            _, high = fetcher.get_watermark_offsets(
                KafkaTopicPartition(topic, partition), cached=True
            )
            highs[(topic, partition)] = high
        return highs

    def offsets_for_times(
        self, times: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """Per partition, the first offset whose timestamp is at or after the time (ms); None
        when there is none.

        The broker's answer (ListOffsets by time) is checked against the message it points at:
        some Kafka-protocol brokers (tansu) answer from their own append time, and answer 0
        where Apache Kafka answers "none". Reading forward from the answer to the first message
        whose timestamp is at or after the time is exact on every broker; on Apache Kafka that
        is the answer itself (one fetch per partition, once, when the query starts).
        """
        if not times:
            return {}
        consumer = self._consumer()
        request = [KafkaTopicPartition(t, p, ms) for (t, p), ms in sorted(times.items())]
        timeout = self.options.metadata_timeout_s
        answers = self._call(
            "offsets-for-times request",
            lambda: consumer.offsets_for_times(request, timeout=timeout),
        )
        for answer in answers:
            if answer.error is not None:
                raise KafkaSourceError(
                    self.options.scrub(
                        f"Kafka offsets-for-times request failed for "
                        f"{answer.topic}-{answer.partition}: {answer.error.str()}"
                    )
                )
        found = {(a.topic, a.partition): a.offset for a in answers if a.offset >= 0}
        highs = {tp: high for tp, (_, high) in self.watermarks(list(times)).items()}
        return self._first_at_or_after(times, found, highs)

    def _first_at_or_after(
        self,
        times: Mapping[TopicPartition, int],
        found: Mapping[TopicPartition, int],
        highs: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, int | None]:
        result: dict[TopicPartition, int | None] = dict.fromkeys(times)
        pending = {tp: offset for tp, offset in found.items() if offset < highs[tp]}
        if not pending:
            return result
        fetcher = self._fetch_consumer()
        fetcher.assign([KafkaTopicPartition(t, p, offset) for (t, p), offset in pending.items()])
        deadline = time.monotonic() + self.options.metadata_timeout_s
        while pending and time.monotonic() < deadline:
            for message in fetcher.consume(num_messages=1000, timeout=0.05):
                tp = (str(message.topic()), int(message.partition() or 0))
                if message.error() is not None or tp not in pending:
                    continue
                offset = int(message.offset() or 0)
                if message.timestamp()[1] >= times[tp]:
                    result[tp] = offset
                    del pending[tp]
                elif offset + 1 >= highs[tp]:
                    del pending[tp]
        if pending:
            raise KafkaSourceError(
                self.options.scrub(
                    "Kafka offsets-for-times check timed out reading "
                    + ", ".join(f"{t}-{p}" for t, p in sorted(pending))
                    + f" (waited {self.options.metadata_timeout_s:g} s, fetchOffset.timeoutMs)"
                )
            )
        return result


def reachable(options: Mapping[str, str]) -> Reached:
    """Whether a source's brokers answer a metadata request made with its own ``kafka.*``
    options (SASL/SSL included), for ``validate --check-connections``; secrets scrubbed."""
    target = "kafka"
    try:
        parsed = parse_source_options(options, batch=None)
        target = f"kafka {parsed.bootstrap_servers}"
        view = BrokerView(parsed)
        try:
            partitions = view.partitions()
        finally:
            view.close()
    except Exception as error:
        return Reached(target, False, str(explain(error)))
    if not partitions:
        return Reached(target, True, "brokers answer; no partition matches the subscription yet")
    topics = sorted({topic for topic, _ in partitions})
    return Reached(target, True, f"brokers answer; {len(partitions)} partitions of {topics}")
