"""pyspark's Python worker daemon, without the traceback it prints when Spark hung up first.

When a task fails (a UDF raising, a cancelled stage), Spark may close the worker's socket before
the worker's last flush; pyspark's daemon (``killWorkerOnFlushFailure``, on by default) then
re-raises the ``BrokenPipeError`` / ``ConnectionResetError`` and prints its traceback to the
JVM's stderr — in front of the user, beside lakefeed's one-line report of the task's real
failure. Sessions made by :func:`lakefeed.spark_session` run this module as
``spark.python.daemon.module``: the same daemon, whose worker still exits with the same code,
only that traceback left out (every other one is printed as before).

Spark starts it with ``python -m`` before forking its workers, so it imports nothing that
starts threads (``lakefeed`` and ``lakefeed.runtime`` import no pyspark, pyarrow or pandas).
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

from pyspark import daemon

HUNG_UP = (BrokenPipeError, ConnectionResetError)


class _Traceback:
    """The ``traceback`` module as pyspark's daemon sees it: ``print_exc`` is quiet when Spark
    had closed the worker's socket."""

    def __getattr__(self, name: str) -> Any:
        return getattr(traceback, name)

    @staticmethod
    def print_exc(*args: Any, **kwargs: Any) -> None:
        if not isinstance(sys.exc_info()[1], HUNG_UP):
            traceback.print_exc(*args, **kwargs)


daemon.traceback = _Traceback()  # type: ignore[assignment]

if __name__ == "__main__":
    daemon.manager()
