"""Every ``foreachBatch`` body lakefeed starts, so that stopping its query mid-batch is quiet.

``query.stop()`` interrupts the query's stream thread. While a Python ``foreachBatch`` body
runs, that thread serves the body's Py4J calls (pinned threads), so the body's next or current
JVM call fails with a ``Py4JJavaError`` around ``java.lang.InterruptedException`` (or
``InterruptedIOException`` / ``ClosedByInterruptException``). Py4J hands it back to Spark as a
``Py4JException`` whose message is the body's whole Python traceback, the Java stack trace
included (8 KB and more). Spark then asks whether the query ended because of its stop
(``StreamExecution.isInterruptionException``, Spark 4.3) by matching that message with
``py4j.protocol.Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)(<the three
class names>)``: ``java.util.regex`` recurses once per character for that group, the stream
thread's stack overflows, and the JVM prints a ``StackOverflowError`` of 1,000 frames on stderr
(the query still ends as stopped: the error escapes Spark's ``catch`` after the state was set).

:func:`stop_aware` wraps the body: an interruption is raised again as
:class:`~lakefeed.core.errors.BatchInterruptedError` carrying only the head of that text (a few
dozen characters after the prefix), which Spark's pattern matches at once, so Spark records the
stop as a stop and prints nothing. Exactly once is untouched: the interrupted batch has no entry
in the checkpoint's commit log, and the next start replays it (the sinks' writes are idempotent
by batch id). Any other error passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming import DataStreamWriter

from lakefeed.core.errors import BatchInterruptedError

INTERRUPTIONS = frozenset(
    {
        "java.lang.InterruptedException",
        "java.io.InterruptedIOException",
        "java.nio.channels.ClosedByInterruptException",
    }
)
"""The Java exceptions Spark takes for a stop (``StreamExecution.IO_EXCEPTION_NAMES``)."""

_CAUSES = 8  # how deep the Java cause chain is searched for an interruption


def stop_aware(writer: DataStreamWriter, body: Callable[[DataFrame, int], Any]) -> Any:
    """``writer.foreachBatch(body)``, with an interruption by the query's stop made quiet."""
    return writer.foreachBatch(StopAware(body))


@dataclass(frozen=True)
class StopAware:
    """A ``foreachBatch`` body whose interruption reaches Spark in the short form it matches."""

    body: Callable[[DataFrame, int], Any]

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        try:
            self.body(frame, batch_id)
        except Exception as error:  # a Py4JJavaError (py4j is pyspark's, not imported here)
            interruption = interrupted_by(getattr(error, "java_exception", None))
            if interruption is None:
                raise
            call = str(getattr(error, "errmsg", "An error occurred while calling")).strip()
            # ``from None``: Py4J formats the chain too, and the original's text is the long one.
            raise BatchInterruptedError(
                f"micro-batch {batch_id} was interrupted by its query's stop "
                f"(py4j.protocol.Py4JJavaError: {call}\n: {interruption})",
                fix="nothing to do: the next start of the query replays the batch",
            ) from None


def interrupted_by(java_exception: Any) -> str | None:
    """The Java interruption (class name) a Py4J error's ``java_exception`` is, or is caused
    by; None: another error, or none from Java."""
    try:
        cause = java_exception
        for _ in range(_CAUSES):
            if cause is None:
                return None
            name = str(cause.getClass().getName())
            if name in INTERRUPTIONS:
                return name
            cause = cause.getCause()
    except Exception:  # the JVM could not be asked (a closed gateway): not recognised
        return None
    return None
