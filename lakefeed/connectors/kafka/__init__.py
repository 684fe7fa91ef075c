"""Kafka without jars: format ``lakefeed_kafka`` (Spark's Kafka options and schema) on
librdkafka, plus :func:`read_kafka` for pipeline flows.

Modules: ``options`` (Spark option names → librdkafka, secrets scrubbed), ``offsets`` (offset
JSON, planning, rate limits, data loss), ``client`` (driver-side metadata/watermarks),
``consume`` (one task's [start, end) read), ``produce`` (idempotent at-least-once sink), ``lag``
(lag from query progress), ``source`` (the Spark reader adapters), ``sink`` (the Spark writers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lakefeed.connectors.base import Connector, Reached
from lakefeed.connectors.kafka.pipeline_sink import KafkaSink
from lakefeed.connectors.registry import active_spark
from lakefeed.core.flow_context import current_flow, read_source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NAME = "lakefeed_kafka"


def register(spark: SparkSession) -> bool:
    """Register the ``lakefeed_kafka`` data source on ``spark``."""
    # pyspark, librdkafka: not for the declaration.
    from lakefeed.connectors.kafka.source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    return True


def describe(options: Mapping[str, str]) -> str:
    """What a Kafka source reads, for the UI: its topics, pattern or assigned partitions."""
    lowered = {k.lower(): v for k, v in options.items()}
    if "subscribe" in lowered:
        return "Kafka topics " + ", ".join(t.strip() for t in lowered["subscribe"].split(","))
    if "subscribepattern" in lowered:
        return f"Kafka topics matching {lowered['subscribepattern']}"
    return "Kafka partitions " + lowered.get("assign", "?")


def progress_figures(source_progress: Mapping[str, Any]) -> dict[str, int]:
    """``kafka_lag``: records the broker has beyond what the batch read (see ``lag``)."""
    from lakefeed.connectors.kafka.lag import lag_from_progress  # pyarrow: not for the declaration

    lag = lag_from_progress(dict(source_progress))
    return {} if lag is None else {"kafka_lag": int(lag["total"])}


def _option_name(name: str) -> str:
    """``max_offsets_per_trigger`` → ``maxOffsetsPerTrigger``; dotted names are kept."""
    if "." in name or "_" not in name:
        return name
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _option_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def read_kafka(
    topics: str | Sequence[str] | None = None,
    *,
    bootstrap_servers: str,
    pattern: str | re.Pattern[str] | None = None,
    **options: Any,
) -> DataFrame:
    """Kafka records in Spark's Kafka schema: a streaming DataFrame, or inside a pipeline flow
    whatever the run mode needs (a batch read from earliest in backfill mode).

    ``topics`` is one topic, a comma-separated list or a list; ``pattern`` a regex instead. Other
    options use Spark's names, in camelCase or snake_case (``starting_offsets="earliest"``,
    ``maxOffsetsPerTrigger=1000``); client settings go as ``**{"kafka.security.protocol": ...}``
    or ``kafka={"security.protocol": ...}``.
    """
    if (topics is None) == (pattern is None):
        raise ValueError("read_kafka needs exactly one of topics or pattern")
    settings = {"kafka.bootstrap.servers": bootstrap_servers}
    if pattern is not None:
        settings["subscribePattern"] = pattern if isinstance(pattern, str) else pattern.pattern
    else:
        settings["subscribe"] = ",".join(
            [topics] if isinstance(topics, str) else list(topics or [])
        )
    for name, value in dict(options.pop("kafka", None) or {}).items():
        settings[f"kafka.{name}"] = _option_value(value)
    for name, value in options.items():
        settings[_option_name(name)] = _option_value(value)
    if current_flow() is not None:
        # Inside a pipeline flow the runtime decides stream vs batch (backfill) reads.
        return read_source(NAME, None, settings)
    return active_spark().readStream.format(NAME).options(**settings).load()


def _committed_input(options: Mapping[str, str], end: Any, first_end: Any) -> dict[str, str] | None:
    # pyarrow: not for the declaration.
    from lakefeed.connectors.kafka.offsets import committed_input

    return committed_input(options, end, first_end)


def _reachable(options: Mapping[str, str]) -> Reached | None:
    from lakefeed.connectors.kafka.client import reachable  # librdkafka: not for the declaration

    return reachable(options)


CONNECTOR = Connector(
    name="kafka",
    formats=(NAME,),
    aliases=("kafka",),
    register=register,
    describe=describe,
    progress_figures=progress_figures,
    committed_input=_committed_input,
    check_connection=_reachable,
    sink=KafkaSink(),
)

__all__ = ["CONNECTOR", "NAME", "read_kafka", "register"]
