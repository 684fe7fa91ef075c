"""Stopping a run's queries where no work is lost: each at the end of the micro-batch it is
running, all side by side, within ``stop_timeout``, and without stack dumps in the log.

Spark has no "stop after this batch": ``query.stop()`` interrupts the query's thread. A stop
that lands between batches interrupts the trigger's wait and nothing else. A query whose
batches outlast their trigger interval has no such moment (the next batch starts as the last
ends), and a batch cut by the stop is replayed by the next start, exactly once: the cut is by
design. But Spark's writers, broadcasts and Hadoop's shell commands report that interruption as
an ERROR with a Java stack trace, as if a write had failed (``FileFormatWriter: Aborting job``,
``TorrentBroadcast: Store broadcast ... fail``, ``Shell: Interrupted while joining`` with its
``InterruptedException``), and Py4J logs the body's interruption with its Python traceback.
:func:`quiet_interruptions` mutes exactly those loggers for the stop's duration: a flow that
really fails meanwhile still ends with its error, which the run records itself
(``flow_failed``; Spark's ``MicroBatchExecution`` error line is not muted).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from lakefeed.core.logs import get_logger, set_spark_log_level, spark_log_levels
from lakefeed.runtime import state_memory
from lakefeed.runtime.listener import ProgressListener
from lakefeed.runtime.run.context import RunContext

log = get_logger(__name__)

INTERRUPTION_LOGGERS = (
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",  # ERROR Aborting job
    "org.apache.spark.sql.execution.datasources.FileFormatDataWriter",
    "org.apache.spark.util.Utils",  # ERROR Aborting task (its write's failure callback)
    "org.apache.spark.broadcast.TorrentBroadcast",  # ERROR Store broadcast ... fail
    "org.apache.spark.mapred.SparkHadoopMapRedUtil",
    "org.apache.spark.internal.io.SparkHadoopWriter",
    "org.apache.hadoop.util.Shell",  # WARN Interrupted while joining + InterruptedException
)
"""Loggers that report a batch cut by its query's stop as a failure, with a stack trace."""
PY4J_PROXY_LOGGER = "py4j.clientserver"
"""Python's side of Py4J: logs a ``foreachBatch`` body's error with its traceback before Spark
sees it, the short :class:`~lakefeed.core.errors.BatchInterruptedError` of a cut batch too."""
TASKS_END_TIMEOUT = 10.0  # s: how long the cancelled tasks of stopped queries may take to end


def stop_all(run: RunContext) -> None:
    """Stop every running query once the batch it is running, if any, has ended; within
    ``stop_timeout`` in all. The queries are waited for side by side, each stopped right at
    its own batch end (waiting for one after another, a later query would have begun its
    next batch by then): the stop takes the longest batch, not their sum."""
    running = [
        (s, q, _batch_end(run.listener, q))
        for s in run.flows.values()
        if (q := s.query) is not None
    ]
    deadline = time.monotonic() + run.options.stop_timeout
    if running:
        with (
            quiet_interruptions(run.spark),
            ThreadPoolExecutor(len(running), thread_name_prefix="lakefeed-stop") as pool,
        ):
            list(pool.map(lambda r: graceful_stop(r[1], deadline, r[2]), running))
    for state, query, _ in running:
        run.catch_up(query)
        state.query = None
        run.events.emit(
            "flow_stop",
            f"{state.name} stopped",
            flow=state.name,
            details={"target": state.dataset.name},
        )


@contextmanager
def quiet_interruptions(spark: SparkSession) -> Iterator[None]:
    """:data:`INTERRUPTION_LOGGERS` muted while the queries stop; their levels back after."""
    before = spark_log_levels(spark, INTERRUPTION_LOGGERS)
    set_spark_log_level(spark, before, "OFF")
    proxy = logging.getLogger(PY4J_PROXY_LOGGER)
    proxy_level = proxy.level
    proxy.setLevel(logging.CRITICAL)
    try:
        yield
        _tasks_ended(spark, TASKS_END_TIMEOUT)
    finally:
        proxy.setLevel(proxy_level)
        for name, level in before.items():
            set_spark_log_level(spark, [name], level)


def _tasks_ended(spark: SparkSession, timeout: float) -> None:
    """Wait (up to ``timeout`` s) until no task runs: ``stop()`` returns once the query's thread
    has ended and its job is cancelled, but a cancelled task ends on its own thread when it next
    looks (a Python worker's task once the worker answers), and logs its abort then."""
    context = getattr(spark, "_jsc", None)  # classic sessions only
    deadline = time.monotonic() + timeout
    while context is not None and time.monotonic() < deadline:
        executors = context.sc().statusTracker().getExecutorInfos()
        if not sum(executor.numRunningTasks() for executor in executors):
            return
        time.sleep(0.1)


def _batch_end(listener: ProgressListener | None, query: StreamingQuery) -> Callable[[float], bool]:
    """Waits (up to its argument, in s) for the end of the batch ``query`` runs now: any
    batch after its last progress (which the query sets before the listener hears it)."""
    assert listener is not None  # set before any query starts
    run_id, last = str(query.runId), query.lastProgress
    done = int(last["batchId"]) if last is not None else -1
    return lambda timeout: listener.wait_batch_end(run_id, done, timeout)


def graceful_stop(
    query: StreamingQuery, deadline: float, batch_ended: Callable[[float], bool]
) -> None:
    """Let the running micro-batch commit, then stop (Spark has no stop-after-batch call).

    It stops when no trigger is active or when the batch that was running has ended (its
    progress event: batch and commit log written). Waiting for an idle moment alone could
    take ``stop_timeout`` whole: a query whose batches outlast their trigger interval starts
    the next at once. That next batch, if it has begun, is interrupted by ``stop()`` like a
    kill would interrupt it: the next start replays it, exactly once.
    """
    while query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive", False) or batch_ended(0.1):
            break
    query.stop()


def release_state(spark: SparkSession) -> None:
    """Close the stopped queries' state stores now, not at Spark's next maintenance
    (:func:`lakefeed.runtime.state_memory.release`)."""
    try:
        state_memory.release(spark)
    except Exception:  # the run's outcome stands; Spark's maintenance closes them later
        log.exception("could not close the state stores of the stopped queries")
