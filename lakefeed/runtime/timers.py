"""Triggered runs of flows with processing-time timers (``transformWithState``).

Spark runs a no-data micro-batch on every trigger for a query whose ``transformWithState``
works in processing-time mode (its timers could be due at any wall-clock moment, as with
``flatMapGroupsWithState``'s processing-time timeout). Under ``trigger(availableNow=True)`` that
query never ends: each batch asks for another. The runner therefore starts such a flow, in
the triggered modes only, with ``spark.sql.streaming.noDataMicroBatches.enabled=false`` (read
once when a query starts): due timers fire in the next batch that has data, which is what
Spark promises for processing-time timers. Continuous runs keep the no-data batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession

NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


def has_processing_time_timers(frame: DataFrame) -> bool:
    """Whether the plan holds a ``transformWithState`` operator in processing-time mode."""
    jdf = getattr(frame, "_jdf", None)
    if jdf is None:  # Spark Connect: no JVM plan to look at
        return False
    stack: list[Any] = [jdf.queryExecution().logical()]
    while stack:
        node = stack.pop()
        if "TransformWithState" in node.nodeName() and "ProcessingTime" in str(node.timeMode()):
            return True
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return False


@contextmanager
def triggered_start(spark: SparkSession, frame: DataFrame, trigger: dict) -> Iterator[None]:
    """Start a triggered query whose processing-time timers would keep it running forever
    without no-data batches; the session's setting is restored afterwards."""
    if "processingTime" in trigger or not has_processing_time_timers(frame):
        yield
        return
    previous = spark.conf.get(NO_DATA_BATCHES, None)
    spark.conf.set(NO_DATA_BATCHES, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(NO_DATA_BATCHES)
        else:
            spark.conf.set(NO_DATA_BATCHES, previous)
