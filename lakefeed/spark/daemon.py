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
Importing it changes nothing: it patches pyspark's daemon only when run as Spark's daemon
module, the ``DAEMON`` row of lakefeed's patch table (:mod:`lakefeed.compat.patches`), put in
here since lakefeed imports nothing more in a worker process.
"""

from __future__ import annotations

import sys
import traceback
from types import ModuleType
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


def quiet_traceback(original: ModuleType) -> Any:
    """pyspark daemon's ``traceback`` (``original``, the module) without the hung-up one."""
    return _Traceback()


def quiet() -> None:
    """Put the quiet traceback in pyspark's daemon (the patch table's ``DAEMON`` row)."""
    daemon.traceback = quiet_traceback(daemon.traceback)


if __name__ == "__main__":
    quiet()
    daemon.manager()
