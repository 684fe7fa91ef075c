"""SIGINT and SIGTERM while a run holds the process: both ask the run to stop after the
running micro-batches, and the JVM is kept alive until it has."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from pyspark.sql import SparkSession


def install(spark: SparkSession, request_stop: Callable[[str], None]) -> Callable[[], None]:
    """Route SIGINT/SIGTERM to ``request_stop`` (with the signal's name as the reason); returns
    the function that puts the previous handlers back. Python lets only the main thread
    install handlers: a run on another thread is stopped by its caller."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {
        sig: signal.signal(sig, lambda s, _f: request_stop(signal.Signals(s).name))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    restore_jvm = _jvm_ignores_sigterm(spark)

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        restore_jvm()

    return restore


def _jvm_ignores_sigterm(spark: SparkSession) -> Callable[[], None]:
    """Keep Spark's JVM alive through a SIGTERM while this process stops the run itself.

    A service manager (systemd's default ``KillMode``, ``timeout``, ``kill -- -pgid``) sends
    SIGTERM to the whole process group: the JVM would run its shutdown hooks and exit under the
    queries this process is stopping, and every Py4J call after that fails with a traceback.
    pyspark already keeps SIGINT (Ctrl+C) from the JVM; this does the same for SIGTERM, for the
    length of the run. The JVM still ends with this process (pyspark's gateway exits when its
    parent's pipe closes) and on SIGKILL. Returns the function that puts Java's handler back.
    """
    jvm = getattr(spark, "_jvm", None)  # classic sessions only: Connect's server is its own
    if jvm is None:
        return lambda: None
    term = jvm.sun.misc.Signal("TERM")
    previous = jvm.sun.misc.Signal.handle(term, jvm.sun.misc.SignalHandler.SIG_IGN)
    return lambda: jvm.sun.misc.Signal.handle(term, previous)
