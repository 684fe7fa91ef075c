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

from pyspark.sql import SparkSession

from lakefeed.pipeline.output_modes import PlanFacts

NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


@contextmanager
def triggered_start(spark: SparkSession, facts: PlanFacts, trigger: dict) -> Iterator[None]:
    """Start a triggered query whose processing-time timers would keep it running forever
    without no-data batches (``facts``: its plan's, walked once at validation, see
    :func:`lakefeed.runtime.evaluate.plan_facts`); the session's setting is restored afterwards."""
    if "processingTime" in trigger or not facts.processing_time_timers:
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
