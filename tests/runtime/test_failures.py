"""Failures a user can cause, end to end on real Spark: each ends in one clear message, and the
runner retries by code — a broker that does not answer is retried with backoff, a damaged
checkpoint fails at once with its fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.pipeline.support import load, write
from tests.support.net import free_port

HEAD = "import lakefeed as lf\nfrom pyspark.sql import functions as F\n\n"
GENERATOR = 'lf.source("iot", totalRows=20, rowsPerSecond=1000, startTime="2026-01-01T00:00:00Z")'
NOISE = ("Traceback", "Py4JJavaError", "An error occurred while calling", "\tat org.apache")


def _quiet(text: str) -> None:
    for noise in NOISE:
        assert noise not in text, text


def _validate(spark, folder: Path, *args: str) -> tuple[int, str]:  # noqa: ANN001
    del spark  # the command reuses the running session
    done = CliRunner().invoke(
        cli, ["validate", str(folder), "--lakehouse", str(folder / "lh"), *args]
    )
    return done.exit_code, done.output


@pytest.mark.parametrize(
    ("flow", "expected"),
    [
        (
            'lf.source("iot", rowsPerSecond=-5)',
            ["option rowsPerSecond must be at least 1", "[GENERATOR_OPTION]", "bad.py:6"],
        ),
        (
            'lf.source("nosuchformat", path="/tmp/x")',
            ["[DATA_SOURCE_NOT_FOUND]", "nosuchformat", "bad.py:6"],
        ),
        (
            'lf.read_files("/nonexistent/landing", format="json")',
            ["/nonexistent/landing does not exist", "fix: land a first file", "[FILES_OPTION]"],
        ),
    ],
)
def test_bad_options_end_in_one_whole_message(
    spark, tmp_path: Path, flow: str, expected: list[str]
) -> None:
    folder = write(tmp_path / "p", {"bad.py": HEAD + f"@lf.table\ndef t1():\n    return {flow}\n"})
    code, output = _validate(spark, folder)
    assert code == 2, output
    flat = " ".join(output.split())
    for part in expected:
        assert part in flat, output
    _quiet(output)


def test_debug_shows_the_full_trace(spark, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "p",
        {"bad.py": HEAD + '@lf.table\ndef t1():\n    return lf.source("iot", rowsPerSecond=-5)\n'},
    )
    done = CliRunner().invoke(
        cli, ["--debug", "validate", str(folder), "--lakehouse", str(tmp_path / "lh")]
    )
    assert done.exit_code == 2 and "Traceback" in done.output


def test_a_failing_udf_names_its_exception_and_line(spark, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "p",
        {
            "udf.py": HEAD + "@F.udf('long')\ndef boom(offset):\n    return offset // 0\n\n\n"
            f"@lf.table\ndef t1():\n    return {GENERATOR}.select(boom('offset').alias('o'))\n"
        },
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    options = RunOptions(mode="once", max_restarts=0)
    with pytest.raises(PipelineError) as caught:
        PipelineRunner(load([folder]), lakehouse, spark, options).run()
    message = str(caught.value)
    assert "flow 't1' failed: ZeroDivisionError: integer division or modulo by zero" in message
    assert f"{folder / 'udf.py'}:6" in message
    _quiet(message)
    failed = [e for e in read_events(lakehouse.event_log_path) if e["event_type"] == "flow_failed"]
    assert len(failed) == 1 and "ZeroDivisionError" in failed[0]["message"]
    _quiet(failed[0]["message"])
    assert "Traceback" in failed[0]["details"]["traceback"]  # kept for --debug and the UI


def test_unreachable_broker_is_retried_with_backoff(spark, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "p",
        {
            "k.py": HEAD + "@lf.table\ndef events():\n"
            f"    return lf.read_kafka('t', bootstrap_servers='127.0.0.1:{free_port()}',"
            " **{'fetchOffset.timeoutMs': 300})\n"
        },
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    options = RunOptions(mode="available-now", max_restarts=2, restart_backoff=0.05)
    with pytest.raises(PipelineError, match="KAFKA_UNAVAILABLE"):
        PipelineRunner(load([folder]), lakehouse, spark, options).run()
    events = read_events(lakehouse.event_log_path)
    kinds = [e["event_type"] for e in events]
    assert kinds.count("flow_failed") == 3 and kinds.count("flow_restart") == 2
    for event in events:
        if event["event_type"] == "flow_failed":
            assert "Kafka metadata request failed" in event["message"]
            _quiet(event["message"])


def test_a_damaged_checkpoint_fails_fast_with_its_fix(spark, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "p", {"g.py": HEAD + f"@lf.table\ndef t1():\n    return {GENERATOR}\n"}
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    assert PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="once")).run().ok
    damaged = lakehouse.checkpoint_path("t1") / "offsets" / "0"
    damaged.write_bytes(b"\x00garbage")
    options = RunOptions(mode="available-now", max_restarts=5, restart_backoff=0.05)
    with pytest.raises(PipelineError) as caught:
        PipelineRunner(load([folder]), lakehouse, spark, options).run()
    assert "CHECKPOINT_CORRUPT" in str(caught.value) and str(damaged) in str(caught.value)
    assert "--full-refresh t1" in str(caught.value)
    kinds = [e["event_type"] for e in read_events(lakehouse.event_log_path)]
    assert "flow_restart" not in kinds and kinds.count("flow_start") == 1  # the first run only


def test_a_first_batch_killed_mid_write_does_not_brick_the_checkpoint(
    spark, tmp_path: Path
) -> None:
    """kill -9 while Spark writes batch 0's offsets leaves only a temporary file behind."""
    folder = write(
        tmp_path / "p", {"g.py": HEAD + f"@lf.table\ndef t1():\n    return {GENERATOR}\n"}
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    leftover = lakehouse.checkpoint_path("t1") / "offsets" / ".0.5e1f.tmp"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("v1\n")
    result = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="once")).run()
    assert result.ok and not leftover.exists()
    assert spark.read.format("delta").load(str(lakehouse.table_path("t1"))).count() == 20


def test_a_sql_error_names_the_sql_file_line(spark, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "p",
        {
            "g.py": HEAD + f"@lf.table\ndef raw():\n    return {GENERATOR}\n",
            "s.sql": "-- readings\n\nCREATE STREAMING TABLE readings\nAS SELECT offset,\n"
            "  no_such_column\nFROM STREAM(raw);\n",
        },
    )
    code, output = _validate(spark, folder)
    assert code == 2
    flat = " ".join(output.split())
    assert f"{folder / 's.sql'}:5" in flat and "no_such_column" in flat, output
    _quiet(output)


def test_check_connections_reports_each_flow(spark, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.json").write_text('{"x": 1}\n')
    folder = write(
        tmp_path / "p",
        {
            "k.py": HEAD + "@lf.table\ndef events():\n"
            f"    return lf.read_kafka('t', bootstrap_servers='127.0.0.1:{free_port()}',"
            " **{'fetchOffset.timeoutMs': 300, 'kafka.sasl.password': 'hunter2-secret'})\n\n"
            f"@lf.table\ndef files():\n    return lf.read_files({str(landing)!r})\n"
        },
    )
    code, output = _validate(spark, folder)
    assert code == 0, output  # validate alone contacts nothing
    code, output = _validate(spark, folder, "--check-connections")
    assert code == 2, output
    flat = " ".join(output.split())
    assert "FAILED" in flat and "KAFKA_UNAVAILABLE" in flat and "'events'" in flat
    assert "hunter2-secret" not in output
    _quiet(output)


def _lakefeed(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.mark.spark
def test_cli_run_of_a_failing_udf_prints_its_cause_not_a_jvm_dump(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "p",
        {
            "udf.py": HEAD + "def boom(offset):\n    return offset // 0\n\n\n"
            f"@lf.table\ndef t1():\n    return {GENERATOR}.select("
            "F.udf(boom, 'long')('offset').alias('o'))\n"
        },
    )
    lakehouse = str(tmp_path / "lh")
    done = _lakefeed(
        "run", str(folder), "--mode", "once", "--lakehouse", lakehouse, "--max-restarts", "0",
        "--master", "local[1]", cwd=tmp_path,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    flat = " ".join(output.split())
    assert "ZeroDivisionError: integer division or modulo by zero" in flat, output
    assert f"{folder / 'udf.py'}:5" in flat, output
    _quiet(output)
    assert len(output.splitlines()) < 40, output


@pytest.mark.spark
def test_cli_run_retries_an_unreachable_broker_one_line_per_attempt(tmp_path: Path) -> None:
    """The whole command, as a user runs it: no stack dumps, one log line per attempt."""
    folder = write(
        tmp_path / "p",
        {
            "k.py": HEAD + "@lf.table\ndef events():\n"
            f"    return lf.read_kafka('t', bootstrap_servers='127.0.0.1:{free_port()}',"
            " **{'fetchOffset.timeoutMs': 300})\n"
        },
    )
    done = _lakefeed(
        "run", str(folder), "--mode", "available-now", "--lakehouse", str(tmp_path / "lh"),
        "--max-restarts", "1", "--master", "local[1]", cwd=tmp_path,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    logged = [line for line in done.stderr.splitlines() if line.startswith("{")]
    attempts = [line for line in logged if "flow 'events' failed" in line]
    assert len(attempts) == 2, output  # the first try and one restart
    assert "restart 1/1" in attempts[0] and "no restarts left" in attempts[1]
    assert "KAFKA_UNAVAILABLE" in output
    _quiet(output)


def test_a_checkpoint_damaged_during_a_continuous_run_fails_its_restart_at_once(
    spark, tmp_path: Path
) -> None:
    """The first guard saw a sound checkpoint; a file damaged afterwards (here by the failing
    batch itself) is caught when the flow restarts, not retried until restarts run out."""
    armed = tmp_path / "armed"
    armed.touch()
    offsets = Lakehouse.at(tmp_path / "lh").checkpoint_path("t1") / "offsets"
    folder = write(
        tmp_path / "p",
        {
            "g.py": HEAD + "import os, pathlib\n\n"
            "@F.udf('long')\ndef damage(offset):\n"
            f"    if os.path.exists({str(armed)!r}):\n"
            f"        for f in pathlib.Path({str(offsets)!r}).iterdir():\n"
            "            if f.name.isdigit():\n"
            "                f.write_bytes(b'\\x00garbage')\n"
            "        raise RuntimeError('the batch fails once its checkpoint is damaged')\n"
            "    return offset\n\n\n"
            "@lf.table\ndef t1():\n"
            '    return lf.source("iot", rowsPerSecond=100).select(damage("offset").alias("o"))\n'
        },
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    options = RunOptions(
        mode="continuous", trigger_interval="1 second", max_restarts=3, restart_backoff=0.05
    )
    PipelineRunner(load([folder]), lakehouse, spark, options).run()
    failed = [e for e in read_events(lakehouse.event_log_path) if e["event_type"] == "flow_failed"]
    assert len(failed) == 2, [e["message"] for e in failed]  # the batch, then its one restart
    restart = failed[1]["details"]
    assert restart["code"] == "CHECKPOINT_CORRUPT" and restart["permanent"]
    assert "--full-refresh t1" in failed[1]["message"]


def test_the_worker_daemon_drops_only_the_hung_up_traceback() -> None:
    """A failed task's worker may find its socket closed by Spark at its last flush: pyspark's
    daemon printed that BrokenPipeError's traceback beside lakefeed's report (CI caught it once
    under load); any other exception's traceback is still printed."""
    code = (
        "import sys\n"
        "from lakefeed.spark import daemon\n"
        "daemon.quiet()\n"
        "errors = BrokenPipeError(32, 'Broken pipe'), ConnectionResetError(), KeyError('k')\n"
        "for error in errors:\n"
        "    try:\n"
        "        raise error\n"
        "    except BaseException:\n"
        "        daemon.daemon.traceback.print_exc()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Traceback") == 1 and "KeyError: 'k'" in done.stderr, done.stderr


@pytest.mark.spark
def test_sessions_run_lakefeeds_worker_daemon(spark) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.python.daemon.module") == "lakefeed.spark.daemon"
    assert spark.range(3).selectExpr("id").rdd.map(lambda row: row.id * 2).sum() == 6
