"""A graceful stop ends after the batch in flight, also when batches outlast their trigger
interval (then the query is never idle, and waiting for an idle moment took ``stop_timeout``)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.event_log import EventLog, read_events
from lakefeed.runtime.listener import ProgressListener
from lakefeed.runtime.run.stopping import graceful_stop
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import load, table, write


class _BusyQuery:
    """A query whose trigger is always active (each batch starts the next at once)."""

    def __init__(self) -> None:
        self.isActive = True
        self.status = {"isTriggerActive": True}

    def stop(self) -> None:
        self.isActive = False


def _progress(batch_id: int) -> SimpleNamespace:
    return SimpleNamespace(progress=SimpleNamespace(runId="r", batchId=batch_id, name="x"))


def test_stop_waits_for_the_batch_end_not_an_idle_moment(tmp_path: Path) -> None:
    """Spark-free: a query that is never idle stops when the listener hears of a batch after
    the last one it had completed (batch 3 here), else at the deadline; old news (batch 3's
    own event, late on the bus) is no batch end."""
    listener = ProgressListener(EventLog(str(tmp_path / "events"), "p"), {})
    for batch_end, stops_after in ((None, 0.3), (0.2, 0.2)):
        query = _BusyQuery()
        listener.onQueryProgress(_progress(3))
        started = time.monotonic()  # before the timer starts: it may fire a hair early otherwise
        if batch_end is not None:
            threading.Timer(batch_end, listener.onQueryProgress, [_progress(4)]).start()
        deadline = started + (30 if batch_end else 0.3)
        graceful_stop(query, deadline, lambda t: listener.wait_batch_end("r", 3, t))  # type: ignore[arg-type]
        assert not query.isActive
        assert stops_after <= time.monotonic() - started < stops_after + 0.5


SLOW = """
import time
import lakefeed as lf

def slow(batches):
    time.sleep(2)  # one task per batch: each batch takes 2 s, its trigger interval 1 s
    yield from batches

@lf.table
def slow_rows():
    rows = lf.source("iot", rowsPerSecond=20, numPartitions=1, maxRowsPerTrigger=10)
    return rows.select("offset").mapInArrow(slow, "offset long")
"""


def test_a_stop_ends_after_the_batch_in_flight(spark, tmp_path: Path) -> None:
    """Batches of ~2 s on a 1-second trigger: the stop asked during a batch ends once that
    batch committed (it took the whole 60 s ``stop_timeout`` before, then stopped hard)."""
    lakehouse = Lakehouse.at(tmp_path / "lh")
    pipeline = load([write(tmp_path / "p", {"slow.py": SLOW})])
    asked: dict[str, float] = {}

    def stop_in_a_batch(runner: PipelineRunner) -> None:
        query = runner.flows["slow_rows"].query
        progress = query.lastProgress if query is not None else None
        busy = query is not None and progress is not None and query.status["isTriggerActive"]
        if busy and not asked:
            asked.update(batch=progress["batchId"] + 1, at=time.monotonic())
            runner.request_stop("test")

    options = RunOptions(
        mode="continuous", trigger_interval="1 second", stop_timeout=60, duration=120
    )
    result = PipelineRunner(pipeline, lakehouse, spark, options, stop_in_a_batch).run()
    took = time.monotonic() - asked["at"]
    assert result.ok and result.reason == "test", result
    print(f"stop latency {took:.1f} s")
    in_flight = int(asked["batch"])
    assert (lakehouse.checkpoint_path("slow_rows") / "commits" / str(in_flight)).exists()
    progress = [
        e["details"]
        for e in read_events(lakehouse.event_log_path)
        if e["event_type"] == "flow_progress"
    ]
    assert max(p["batchId"] for p in progress) == in_flight
    # exactly once: the table holds each committed batch's rows once
    offsets = table(lakehouse, "slow_rows").column("offset").to_pylist()
    assert len(offsets) == len(set(offsets)) == sum(p["numInputRows"] for p in progress)
    assert took < 30, f"stop took {took:.1f} s (a batch takes ~2 s; the timeout is 60 s)"


SLOW_SPLIT = """
import os, time, uuid
import lakefeed as lf

def slow(batches):
    open(os.path.join({marks!r}, uuid.uuid4().hex), "w").close()  # a job of the body runs
    time.sleep(1.5)
    yield from batches

@lf.table
@lf.expect_or_drop("even", "offset % 2 = 0")
def split_rows():
    rows = lf.source("iot", rowsPerSecond=20, numPartitions=1, maxRowsPerTrigger=10)
    return rows.select("offset").mapInArrow(slow, "offset long")
"""


def test_a_stop_inside_a_foreach_batch_body_is_quiet_and_exact(spark, tmp_path: Path) -> None:
    """A flow with drop rules writes in ``foreachBatch``; its query stopped while the body waits
    for a Spark job (whose Python sleeps) ends as stopped, and the JVM prints nothing (Spark's
    matching of the interruption's Py4J message overflowed the stream thread's stack before:
    a ``StackOverflowError`` of 1,000 frames on stderr). The cut batch has no commit; the next
    run replays it: each offset once, in the table or in the quarantine."""
    lakehouse = Lakehouse.at(tmp_path / "lh")
    marks = tmp_path / "marks"
    marks.mkdir()
    pipeline = load([write(tmp_path / "p", {"split.py": SLOW_SPLIT.format(marks=str(marks))})])

    def stop_inside_a_body(runner: PipelineRunner) -> None:
        query = runner.flows["split_rows"].query
        if query is not None and any(marks.iterdir()):
            query.stop()  # what a stop landing in a batch does: interrupt it
            runner.request_stop("test")

    jvm = spark.sparkContext._jvm
    printed, stderr = jvm.java.io.ByteArrayOutputStream(), jvm.System.err
    jvm.System.setErr(jvm.java.io.PrintStream(printed, True))
    try:
        options = RunOptions(mode="continuous", trigger_interval="1 second", duration=120)
        first = PipelineRunner(pipeline, lakehouse, spark, options, stop_inside_a_body).run()
        time.sleep(0.5)  # the stream thread's last words, if any, come after stop() returns
    finally:
        jvm.System.setErr(stderr)
    noise = str(printed.toString())
    assert "StackOverflowError" not in noise and "Exception in thread" not in noise, noise[:2000]
    assert first.ok and first.reason == "test", first
    checkpoint = lakehouse.checkpoint_path("split_rows")
    assert (checkpoint / "offsets" / "0").exists()
    assert not (checkpoint / "commits" / "0").exists()
    again = PipelineRunner(pipeline, lakehouse, spark, RunOptions(mode="once")).run()
    assert again.ok, again
    assert (checkpoint / "commits" / "0").exists()  # the cut batch, replayed
    kept = table(lakehouse, "split_rows").column("offset").to_pylist()
    dropped = table(lakehouse, "split_rows_quarantine").column("offset").to_pylist()
    progress = read_events(lakehouse.event_log_path, event_types=["flow_progress"])
    read = sum(e["details"]["numInputRows"] for e in progress)
    assert all(o % 2 == 0 for o in kept) and all(o % 2 == 1 for o in dropped)
    assert len(kept) + len(dropped) == len(set(kept) | set(dropped)) == read > 0


MANY = """
import time
import lakefeed as lf

def slow(batches):
    time.sleep(1.5)  # each batch outlasts its 1-second trigger: the stop cuts a batch begun
    yield from batches

@lf.table
def slow_a():
    rows = lf.source("iot", rowsPerSecond=20, numPartitions=1, maxRowsPerTrigger=10)
    return rows.select("offset").mapInArrow(slow, "offset long")

@lf.table
def slow_b():
    return lf.read_stream("slow_a").mapInArrow(slow, "offset long")

@lf.table
def plain_c():
    return lf.read_stream("slow_a").select("offset")
"""


class _LogCapture:
    """Every log4j event of the driver JVM at WARN and above, its stack trace included, kept
    in memory (Spark's console appender writes to the stderr the JVM started with, which the
    test cannot read)."""

    def __init__(self, spark) -> None:  # noqa: ANN001
        jvm = spark.sparkContext._jvm
        core = jvm.org.apache.logging.log4j.core
        self.context = core.LoggerContext.getContext(False)
        self.writer = jvm.java.io.StringWriter()
        layout = core.layout.PatternLayout.newBuilder().withPattern("%p %c: %m%n%throwable").build()
        appender = core.appender.WriterAppender.createAppender(
            layout, None, self.writer, "lakefeed-test-capture", False, True
        )
        appender.start()
        self.appender = appender
        self.config = self.context.getConfiguration()
        self.config.addAppender(appender)
        self.config.getRootLogger().addAppender(appender, None, None)
        self.context.updateLoggers()

    def close(self) -> str:
        self.config.getRootLogger().removeAppender("lakefeed-test-capture")
        self.context.updateLoggers()
        self.appender.stop()
        return str(self.writer.toString())


def test_stopping_many_flows_mid_batch_logs_no_error_and_no_trace(
    spark, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Three continuous flows whose batches outlast their trigger, stopped with no time to wait
    for a batch end (``stop_timeout=0``): the stop cuts the batches in flight, as it cuts the
    ones begun after them when batches overrun. It ends with no ERROR line and no stack trace
    in the log (before: ``FileFormatWriter: Aborting job``, ``Utils: Aborting task``, each with
    the cut batch's ``InterruptedException``), and the next run replays the cut batches,
    exactly once."""
    lakehouse = Lakehouse.at(tmp_path / "lh")
    pipeline = load([write(tmp_path / "p", {"many.py": MANY})])
    capture = _LogCapture(spark)
    try:
        options = RunOptions(
            mode="continuous", trigger_interval="1 second", duration=6, stop_timeout=0
        )
        first = PipelineRunner(pipeline, lakehouse, spark, options).run()
        time.sleep(1)  # a cancelled task's last words, if any, come after stop() returns
    finally:
        logged = capture.close()
    assert first.ok and first.reason == "duration reached", first
    errors = [line for line in logged.splitlines() if line.startswith("ERROR")]
    traces = [line for line in logged.splitlines() if line.startswith("\tat ")]
    assert not errors and not traces, logged[:3000]
    python_errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not python_errors, [r.getMessage() for r in python_errors]  # Py4J's, a body's trace
    again = PipelineRunner(pipeline, lakehouse, spark, RunOptions(mode="available-now")).run()
    assert again.ok, again
    source = table(lakehouse, "slow_a").column("offset").to_pylist()
    assert len(source) == len(set(source)) > 0
    for name in ("slow_b", "plain_c"):
        offsets = table(lakehouse, name).column("offset").to_pylist()
        assert sorted(offsets) == sorted(source), name  # each row once, none lost
