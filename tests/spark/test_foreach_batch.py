"""Spark-free: a ``foreachBatch`` body interrupted by its query's stop reaches Spark as a short
text its stop check matches at once; every other error passes through unchanged."""

from __future__ import annotations

import re
import traceback

import pytest
from py4j.protocol import Py4JJavaError

from lakefeed.core.errors import BatchInterruptedError, is_permanent
from lakefeed.spark.foreach_batch import INTERRUPTIONS, StopAware

# Spark 4.3's StreamExecution.PROXY_ERROR, which it runs over a Py4J message once stop() was asked.
PROXY_ERROR = re.compile(
    r"py4j.protocol.Py4JJavaError: An error occurred while calling((.|\r\n|\r|\n)*)("
    + "|".join(sorted(INTERRUPTIONS))
    + ")"
)


class _Java:
    """A Java exception as Py4J shows it: its class name and its cause."""

    _target_id = "o1"

    def __init__(self, name: str, cause: _Java | None = None) -> None:
        self.name, self.cause = name, cause

    def getClass(self) -> _Java:  # noqa: N802 - Java's names
        return self

    def getName(self) -> str:  # noqa: N802
        return self.name

    def getCause(self) -> _Java | None:  # noqa: N802
        return self.cause


def _failing(java: _Java) -> StopAware:
    def body(frame: object, batch_id: int) -> None:
        raise Py4JJavaError("An error occurred while calling o42.save.\n", java)

    return StopAware(body)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "java",
    [
        _Java("java.lang.InterruptedException"),
        _Java(
            "org.apache.spark.SparkException", _Java("java.nio.channels.ClosedByInterruptException")
        ),
    ],
)
def test_an_interruption_reaches_spark_short_and_recognised(java: _Java) -> None:
    with pytest.raises(BatchInterruptedError) as raised:
        _failing(java)(None, 7)  # type: ignore[arg-type]
    error = raised.value
    assert error.__suppress_context__ and not is_permanent(error)
    # What Py4J hands Spark: the formatted traceback (no long Java stack trace in it).
    text = "".join(traceback.format_exception(error))
    found = PROXY_ERROR.search(text)
    assert found is not None and len(text) - found.start() < 400, text
    assert "micro-batch 7" in text and "o42.save" in text


def test_other_errors_pass_through_unchanged() -> None:
    def bad_row(frame: object, batch_id: int) -> None:
        raise ValueError("bad row")

    with pytest.raises(Py4JJavaError):
        _failing(_Java("org.apache.spark.sql.AnalysisException"))(None, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bad row"):
        StopAware(bad_row)(None, 1)  # type: ignore[arg-type]
