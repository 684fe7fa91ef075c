"""Stopping a run's queries where no work is lost: each at the end of the micro-batch it is
running, all side by side, within ``stop_timeout``."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from lakefeed.core.logs import get_logger
from lakefeed.runtime import state_memory
from lakefeed.runtime.listener import ProgressListener
from lakefeed.runtime.run.context import RunContext

log = get_logger(__name__)


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
        with ThreadPoolExecutor(len(running), thread_name_prefix="lakefeed-stop") as pool:
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
