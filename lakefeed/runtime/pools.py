"""How flows share the cores: every micro-batch first come, first served; batch work beside it.

All flows of a run share one SparkContext and its task slots (``local[2]``: two). Spark's FAIR
scheduler (:func:`lakefeed.spark_session` sets ``spark.scheduler.mode=FAIR``) orders its pools
by running tasks over weight and breaks a tie by the pool's **name**. With one pool per flow,
every pool waiting with no task running ties at zero, so each freed slot went to the waiting
flow whose name sorts first: ``bronze_*`` before ``gold_*`` before ``silver_*``, ``silver_0``
before ``silver_9``. Once the slots were contended (30 flows whose processing-time triggers all
fire on the same wall-clock boundaries), that was a fixed priority order, and the flows at its
end fell minutes behind while the first ones stayed fresh (issue 35, item 6).

So the scheduling model is:

- **streaming micro-batches** of every flow (:func:`stream_pool`) run in one pool,
  :data:`STREAMS_POOL`. A pool Spark makes on first use schedules FIFO inside: jobs by
  submission order. A query submits one batch's jobs at a time, so the flow whose job has
  waited longest runs next, whatever its name or start order, and a flow cannot hold the slots
  for two batches while another waits: round robin in arrival order, work-conserving (a free
  slot never waits while any flow has a task).
- **batch work** (a materialized view's refresh, a ``once`` flow, snapshots, backfills;
  :func:`flow_pool`) runs in a pool named after its dataset or flow, FAIR beside the streams
  pool: a long refresh gets an equal share of the slots, never all of them, and the
  micro-batches keep theirs.

Spark's ``spark.scheduler.pool`` local property, set in the thread that calls ``start()``, is
inherited by the query's own thread, so every job of a flow's query (its micro-batches,
``foreachBatch`` writes) runs in the pool set around its start. Pools not declared in an
allocation file (``spark.scheduler.allocation.file``) are made on first use with weight 1
(:func:`lakefeed.spark.session.spark_session` keeps Spark's warning about each out of the log:
lakefeed makes them on purpose); declare ``lakefeed_streams`` there to weigh all streaming work
against refreshes. A session built in FIFO mode ignores the property (Spark's own behaviour);
Spark Connect sessions have no SparkContext, and their flows keep the server's scheduling.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

POOL_PROPERTY = "spark.scheduler.pool"
STREAMS_POOL = "lakefeed_streams"
"""The one pool of every flow's micro-batches (FIFO inside: first come, first served)."""


@contextmanager
def stream_pool(spark: SparkSession) -> Iterator[None]:
    """Queries started in this thread meanwhile run their micro-batches in :data:`STREAMS_POOL`."""
    with flow_pool(spark, STREAMS_POOL):
        yield


@contextmanager
def flow_pool(spark: SparkSession, pool: str) -> Iterator[None]:
    """Jobs started in this thread meanwhile, and queries started here, run in ``pool`` (a
    batch write: the dataset's or flow's name)."""
    context = getattr(spark, "_sc", None)  # classic sessions only
    if context is None:
        yield
        return
    previous = context.getLocalProperty(POOL_PROPERTY)
    context.setLocalProperty(POOL_PROPERTY, pool)
    try:
        yield
    finally:
        context.setLocalProperty(POOL_PROPERTY, previous)  # None unsets it
