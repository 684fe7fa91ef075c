"""Fair scheduling between flows: each flow's Spark jobs run in its own scheduler pool.

All flows of a continuous run share one SparkContext. In Spark's default FIFO mode the jobs of
the queries queue one after another, so a flow with a heavy batch holds up every other flow's
trigger. :func:`lakefeed.spark_session` sets ``spark.scheduler.mode=FAIR``, and the runner starts
each flow's query inside :func:`flow_pool`: Spark's ``spark.scheduler.pool`` local property,
set in the thread that calls ``start()``, is inherited by the query's own thread, so every job
of that flow (its micro-batches, ``foreachBatch`` writes, a materialized view's refresh) runs in
a pool named after the flow. Pools not declared in an allocation file
(``spark.scheduler.allocation.file``) are made on first use with weight 1, so the flows share
the cores evenly (:func:`lakefeed.spark.session.spark_session` keeps Spark's warning about each
such pool out of the log: lakefeed makes them on purpose); declare a pool of the flow's name
there to weigh one flow higher.

A session built in FIFO mode ignores the property (Spark's own behaviour); Spark Connect
sessions have no SparkContext, and their flows keep the server's scheduling.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

POOL_PROPERTY = "spark.scheduler.pool"


@contextmanager
def flow_pool(spark: SparkSession, flow: str) -> Iterator[None]:
    """Jobs started in this thread meanwhile, and queries started here, run in pool ``flow``."""
    context = getattr(spark, "_sc", None)  # classic sessions only
    if context is None:
        yield
        return
    previous = context.getLocalProperty(POOL_PROPERTY)
    context.setLocalProperty(POOL_PROPERTY, flow)
    try:
        yield
    finally:
        context.setLocalProperty(POOL_PROPERTY, previous)  # None unsets it
