"""Turning any failure into one message: lakefeed's own kept whole, a worker's cause found,
a damaged checkpoint refused as permanent, SQL errors at the file's line. No Spark here: the
Spark-side shapes are covered in tests/runtime/test_failures.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lakefeed import load_pipeline
from lakefeed.cli.main import cli
from lakefeed.connectors.generator.iot import GeneratorOptionError
from lakefeed.core import errors
from lakefeed.core.explain import explain, readable
from lakefeed.pipeline.graph import PipelineError
from lakefeed.spark.checkpoint_files import check_checkpoint_files

# The shape Spark gives a Python data source's error raised on the driver (abridged).
PY4J = """An error occurred while calling o75.load.
: org.apache.spark.sql.AnalysisException: [PYTHON_DATA_SOURCE_ERROR] Failed to create Python \
data source instance: Traceback (most recent call last):
  File "/venv/pyspark/sql/worker/create_data_source.py", line 142, in main
    data_source = data_source_cls(options=options)
  File "/repo/lakefeed/connectors/generator/iot.py", line 175, in __init__
    raise GeneratorOptionError(...)
lakefeed.connectors.generator.iot.GeneratorOptionError: {message}
 SQLSTATE: 38000
\tat org.apache.spark.sql.errors.QueryCompilationErrors$.pythonDataSourceError(Errors.scala:1)
\tat org.apache.spark.sql.execution.python.UserDefinedPythonDataSource.runner(Python.scala:2)
"""

# A UDF failing in a task: the Python worker's traceback inside the query's error.
WORKER = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due \
to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0: \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/venv/pyspark/worker.py", line 2000, in main
    process()
  File "/venv/pyspark/util.py", line 100, in wrapper
    return f(*args, **kwargs)
  File "/home/me/pipelines/udf.py", line 7, in boom
    return 1 // 0
           ~~^~~
ZeroDivisionError: integer division or modulo by zero

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(R.scala:1)
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.hasNext(R.scala:2)
Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(D.scala:1)
"""


class _Py4JLike(Exception):
    """Stands in for a Py4J/Spark error: only its text reaches Python intact."""


def test_lakefeed_message_is_kept_whole_with_its_fix() -> None:
    own = GeneratorOptionError(
        "option rowsPerSecond must be at least 1, got -5\nsecond line of detail",
        fix="pass rowsPerSecond=1 or more",
    )
    failure = explain(_Py4JLike(PY4J.format(message=own)))
    assert failure.message == (
        "option rowsPerSecond must be at least 1, got -5\nsecond line of detail — "
        "fix: pass rowsPerSecond=1 or more [GENERATOR_OPTION]"
    )
    assert failure.code == "GENERATOR_OPTION" and failure.permanent is True
    assert "Traceback" not in str(failure) and "o75" not in str(failure)


def test_python_worker_failure_names_the_exception_and_the_pipeline_line() -> None:
    failure = explain(_Py4JLike(WORKER))
    assert failure.message == "ZeroDivisionError: integer division or modulo by zero"
    assert failure.where == "/home/me/pipelines/udf.py:7"
    assert failure.code == "STREAM_FAILED" and failure.permanent is None  # unknown: retried


def test_transient_codes_say_so_through_any_wrapping() -> None:
    text = PY4J.format(message=errors.UnavailableError("no broker answered"))
    assert explain(_Py4JLike(text)).permanent is False


def test_readable_moves_the_code_to_the_end() -> None:
    assert readable("[LAKEFEED:X_Y] it broke — fix: mend it") == "it broke — fix: mend it [X_Y]"
    assert readable("nothing to move") == "nothing to move"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("offsets/3", b"\x00\x13garbage"),
        ("offsets/4", b""),
        ("commits/2", b"v1\n{not json"),
        ("metadata", b"{truncated"),
    ],
)
def test_a_damaged_checkpoint_file_is_a_permanent_error(
    tmp_path: Path, name: str, content: bytes
) -> None:
    checkpoint = tmp_path / "cp"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    (checkpoint / "metadata").write_text('{"id":"q"}\n')
    (checkpoint / "_lakefeed.json").write_text('{\n  "flow": "t1"\n}')  # pretty-printed
    (checkpoint / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"offset":3}\n')
    (checkpoint / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    check_checkpoint_files(checkpoint, "t1", "lakefeed run P --full-refresh t1")  # healthy
    (checkpoint / name).write_bytes(content)
    with pytest.raises(errors.CheckpointError) as caught:
        check_checkpoint_files(checkpoint, "t1", "lakefeed run P --full-refresh t1")
    assert caught.value.code == "CHECKPOINT_CORRUPT"
    assert errors.is_permanent(str(caught.value)) is True
    assert str(checkpoint / name) in str(caught.value) and "--full-refresh t1" in str(caught.value)


def test_sql_problems_name_the_file_line(tmp_path: Path) -> None:
    sql = tmp_path / "flows.sql"
    sql.write_text(
        "-- a header\n/* two\nlines */\nCREATE STREAMING TABLE a AS SELECT * FROM STREAM(x);\n\n"
        "CREATE STREAMING TABLE b (\n  CONSTRAINT c EXPECT (x > 1) ON VIOLATION EXPLODE\n)"
        " AS SELECT 1;\n"
    )
    with pytest.raises(PipelineError) as caught:
        load_pipeline([sql])
    assert f"{sql}:6:" in caught.value.problems[0]


def test_python_syntax_and_import_errors_name_the_file_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import lakefeed as lf\n\n\ndef f(:\n    pass\n")
    broken = tmp_path / "broken.py"
    broken.write_text("import lakefeed as lf\nimport no_such_module_here\n")
    with pytest.raises(PipelineError) as caught:
        load_pipeline([bad])
    assert caught.value.problems[0].startswith(f"{bad}:4: SyntaxError")
    with pytest.raises(PipelineError) as caught:
        load_pipeline([broken])
    assert caught.value.problems[0].startswith(f"{broken}:2: ModuleNotFoundError")


def test_cli_ends_in_one_message_and_the_trace_only_with_debug(tmp_path: Path) -> None:
    """A failure no command handles itself (here: a damaged Delta log under `table info`)."""
    table = tmp_path / "t" / "_delta_log"
    table.mkdir(parents=True)
    (table / "00000000000000000000.json").write_text("{not json\n")
    plain = CliRunner().invoke(cli, ["table", "info", str(tmp_path / "t")])
    assert plain.exit_code == 1, plain.output
    assert "error:" in plain.output and "Traceback" not in plain.output
    assert "--debug" in plain.output
    debug = CliRunner().invoke(cli, ["--debug", "table", "info", str(tmp_path / "t")])
    assert debug.exit_code == 1 and "Traceback" in debug.output


def test_spark_analysis_errors_inside_a_failed_query_are_permanent() -> None:
    """The innermost error's SQLSTATE decides (42: the query does not analyze), not the
    wrapper's (XXKST: a stream failed)."""
    text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `x` cannot be resolved. SQLSTATE: 42703 "
        "SQLSTATE: XXKST\n=== Streaming Query ===\nIdentifier: [id = 1]\n"
    )
    failure = explain(_Py4JLike(text))
    assert failure.permanent is True and failure.code == "UNRESOLVED_COLUMN.WITH_SUGGESTION"
    assert "Streaming Query" not in failure.message
