"""The Kafka connector's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import DataLossRiskError, OptionError, SourceError, UnavailableError


class KafkaSourceError(SourceError):
    """The brokers could not answer (unreachable, refused, timed out); message is scrubbed."""

    code = "KAFKA_SOURCE"


class DataLossError(DataLossRiskError):
    """Offsets the query needs are gone; raised only when failOnDataLoss is true."""

    code = "KAFKA_DATA_LOSS"


class KafkaUnavailableError(KafkaSourceError, UnavailableError):
    """No broker answered (down, unreachable, refused): worth a retry with backoff."""

    code = "KAFKA_UNAVAILABLE"


class KafkaOptionError(OptionError):
    """A Kafka option is missing, malformed or unsupported; the message says how to fix it."""

    code = "KAFKA_OPTION"


class KafkaSinkError(UnavailableError):
    """Messages were not delivered; the batch must fail (and be retried by Spark)."""

    code = "KAFKA_SINK"


class ControlTopicBlockedError(KafkaSinkError):
    """The replay check could not read the control topic to its end: another producer's
    transaction stays open on it. Nothing was produced; a later retry can succeed."""

    code = "KAFKA_SINK_CONTROL_BLOCKED"
