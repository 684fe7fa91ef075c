"""Starting streaming queries in tests on a CPU-starved shared machine.

Spark waits a hard-coded 10 s for a freshly spawned Python worker (the driver-side stream
reader) to connect back; when the machine is overloaded the import of pyspark alone can take
longer and the query dies at start with "Python worker failed to connect back". That is Spark's
start-up, not the connector: such a start is retried (from the same checkpoint, which is
exactly-once anyway); every other failure is reported as is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

WORKER_START_FLAKE = "Python worker failed to connect back"


def is_start_flake(query: Any) -> bool:
    error = query.exception()
    return error is not None and WORKER_START_FLAKE in str(error)


def start_query(start: Callable[[], Any], attempts: int = 3, settle: float = 30.0) -> Any:
    """Start a query; restart it while it dies of the worker start-up flake."""
    for _ in range(attempts - 1):
        query = start()
        deadline = time.monotonic() + settle
        while query.isActive and time.monotonic() < deadline and query.lastProgress is None:
            time.sleep(0.2)
        if query.isActive or not is_start_flake(query):
            return query
    return start()


def run_to_end(start: Callable[[], Any], timeout: float = 180.0, attempts: int = 3) -> Any:
    """Run an availableNow query to completion (retrying only the start-up flake)."""
    for attempt in range(attempts):
        query = start()
        try:
            finished = query.awaitTermination(timeout)
        except Exception:
            finished = True
        finally:
            query.stop()
        assert finished, "availableNow query did not finish"
        if not is_start_flake(query) or attempt == attempts - 1:
            return query
    raise AssertionError("unreachable")
