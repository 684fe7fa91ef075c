"""The Spark session exists before any pipeline code runs, as in DLT and SDP: module-level
``SparkSession.active()``, ``col()``/``expr()`` arguments, ``spark.conf.get`` parameters and a
lookup table read at import all work under ``lakefeed run``.

The two CLI runs are subprocesses on purpose: in this test process the shared ``spark``
fixture is already active, which would hide a loader that imports the files before starting
the session (the bug these tests pin down).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed import entry
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import set_config
from lakefeed.pipeline.graph import PipelineError
from tests.pipeline.support import write

# A transformations file as pyspark's SDP guide and real projects start them: the session at
# module level, a parameter and a lookup list read while the file is imported.
SESSION_AT_MODULE_LEVEL = """
from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, lit

spark = SparkSession.active()
PARAM = spark.conf.get("mypipeline.param")
REGIONS = [row.region for row in spark.read.json(spark.conf.get("mypipeline.regions")).collect()]

for region in REGIONS:
    @dp.materialized_view(name=f"{region}_numbers")
    def regional(region_name=region) -> DataFrame:
        return spark.read.table("example_python_materialized_view").select(
            col("id"), lit(region_name).alias("region"), lit(PARAM).alias("param")
        )
"""

# AUTO CDC with Column arguments in the form DLT documents (the corpus's example).
DLT_CDC = (Path(__file__).parent / "corpus" / "dlt_auto_cdc" / "cdc.py").read_text()
# This suite's change feed: (account_id, holder, plan, op, change_seq), two rows arriving
# after a newer change of their key (10 at 6 after 8, 9 at 5 after its delete at 7).
CHANGES_SCHEMA = "account_id BIGINT, holder STRING, plan STRING, op STRING, change_seq BIGINT"
CHANGES = [
    (7, "Ines", "basic", "INSERT", 1),
    (8, "Tomas", "pro", "INSERT", 1),
    (9, "Wen", "basic", "INSERT", 2),
    (10, "Kofi", "team", "INSERT", 3),
    (8, "Tomas", "team", "UPDATE", 4),
    (9, None, None, "DELETE", 7),
    (10, "Kofi", "pro", "UPDATE", 8),
    (9, "Wen", "pro", "UPDATE", 5),
    (10, "Kofi", "basic", "UPDATE", 6),
]
# Worked out by hand from CHANGES. SCD1: each key's change with the highest change_seq, a
# delete removing the key (9).
SCD1 = [(7, "Ines", "basic"), (8, "Tomas", "team"), (10, "Kofi", "pro")]
# SCD2: per key, one row per change in change_seq order, open from its change_seq
# (__START_AT) until the key's next change or delete (__END_AT; None while current).
SCD2 = [
    (7, "Ines", "basic", 1, None),
    (8, "Tomas", "pro", 1, 4),
    (8, "Tomas", "team", 4, None),
    (9, "Wen", "basic", 2, 5),
    (9, "Wen", "pro", 5, 7),
    (10, "Kofi", "team", 3, 6),
    (10, "Kofi", "basic", 6, 8),
    (10, "Kofi", "pro", 8, None),
]


def _lakefeed(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", *args],
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _rows(path: Path, columns: list[str]) -> list[tuple]:
    table = DeltaTable(str(path)).to_pyarrow_table().select(columns)
    return sorted(tuple(row.values()) for row in table.to_pylist())


@pytest.mark.spark
def test_an_sdp_project_using_spark_at_module_level_runs_from_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`spark-pipelines init`'s project, as pyspark writes it, plus a file doing Spark work at
    import: `SparkSession.active()`, a `--conf` parameter, a lookup table read into a list."""
    from pyspark.pipelines.init_cli import init

    monkeypatch.chdir(tmp_path)
    init("demo")
    project = tmp_path / "demo"
    regions = tmp_path / "regions.json"
    regions.write_text('{"region": "north"}\n{"region": "south"}\n')
    (project / "transformations" / "regional.py").write_text(SESSION_AT_MODULE_LEVEL)
    done = _lakefeed(
        "run",
        str(project / "spark-pipeline.yml"),
        "--mode",
        "once",
        "--master",
        "local[1]",
        "--conf",
        "mypipeline.param=hello",
        "--conf",
        f"mypipeline.regions={regions}",
    )
    assert "north_numbers: completed, 10 rows written" in done.stderr, done.stderr[-3000:]
    lakehouse = Lakehouse.at(project / "pipeline-storage")  # the spec's storage
    assert _rows(lakehouse.table_path("example_sql_materialized_view"), ["id"]) == [
        (i,) for i in range(0, 10, 2)
    ]
    for region in ("north", "south"):
        rows = _rows(lakehouse.table_path(f"{region}_numbers"), ["id", "region", "param"])
        assert rows == [(i, region, "hello") for i in range(10)]


@pytest.mark.spark
def test_auto_cdc_with_column_arguments_runs_from_the_cli(tmp_path: Path) -> None:
    """DLT's documented AUTO CDC form, ``sequence_by=col(...)`` and ``expr(...)`` conditions
    built while the file is imported, run by ``lakefeed run``: the SCD1 and SCD2 targets hold
    what the change feed gives."""
    fields = [field.split(" ") for field in CHANGES_SCHEMA.split(", ")]
    types = {"BIGINT": pa.int64(), "STRING": pa.string()}
    schema = pa.schema([(name, types[kind]) for name, kind in fields])
    source = tmp_path / "account_changes"
    write_deltalake(str(source), pa.Table.from_pylist(
        [dict(zip(schema.names, row, strict=True)) for row in CHANGES], schema=schema
    ))  # fmt: skip
    pipeline = write(tmp_path / "pipeline", {"cdc.py": DLT_CDC})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    _lakefeed(
        "run",
        str(pipeline),
        "--mode",
        "once",
        "--master",
        "local[1]",
        "--lakehouse",
        str(lakehouse.root),
        "--conf",
        f"accounts.changes_path={source}",
    )
    current = ["account_id", "holder", "plan"]
    assert _rows(lakehouse.table_path("accounts_current"), current) == sorted(SCD1)
    history = [*current, "__START_AT", "__END_AT"]
    assert _rows(lakehouse.table_path("accounts_history"), history) == sorted(SCD2)


def test_what_starts_the_session_is_found_without_running_the_pipeline(tmp_path: Path) -> None:
    """Name, lakehouse and object-store locations come from the files as text and the spec;
    a file whose module level needs Spark is not run for that."""
    write(
        tmp_path / "p",
        {
            "spark-pipeline.yml": "name: orders\nstorage: s3://lake/orders\n"
            "configuration:\n  landing: s3a://landing/orders/\n"
            "libraries:\n  - glob:\n      include: flows.py\n",
            "flows.py": "from pyspark.sql import SparkSession\n\nspark = SparkSession.active()\n"
            'TABLE = "s3://tables/customers"\n',
        },
    )
    found = entry.find(tmp_path / "p", {"extra": "s3://extra/x"})
    assert found.name == "orders"
    lakehouse = entry.lakehouse_for(None, found)
    assert str(lakehouse.root) == "s3://lake/orders"
    assert entry.storage_locations(found, lakehouse)[1:] == [
        "s3a://landing/orders", "s3://extra/x", "s3://tables/customers"
    ]  # fmt: skip


def test_a_file_python_cannot_compile_is_refused_before_any_session(tmp_path: Path) -> None:
    write(tmp_path / "p", {"a.py": "import lakefeed as lf\n", "b.py": "def oops(:\n"})
    with pytest.raises(PipelineError) as caught:
        entry.find(tmp_path / "p")
    (problem,) = caught.value.problems
    assert f"{tmp_path / 'p' / 'b.py'}:1: SyntaxError" in problem


@pytest.mark.slow  # a fresh interpreter imports pyspark
def test_spark_at_import_without_any_session_is_a_coded_refusal(tmp_path: Path) -> None:
    """A Spark-free load (no session in the process) of a file building a Column at module
    level: pyspark's bare `assert` becomes the code and the fix, never an empty
    AssertionError. A subprocess, as this test process may hold the shared session."""
    file = write(tmp_path / "p", {"cdc.py": DLT_CDC})
    script = (
        "from lakefeed import load_pipeline\n"
        "from lakefeed.pipeline.graph import PipelineError\n"
        "try:\n"
        f"    load_pipeline([{str(file)!r}])\n"
        "except PipelineError as error:\n"
        "    print(error.problems[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert "[LAKEFEED:PIPELINE_NO_SESSION]" in done.stdout, done.stdout + done.stderr
    line = DLT_CDC.splitlines().index('    sequence_by=col("change_seq"),') + 1
    assert f"cdc.py:{line}:" in done.stdout, done.stdout
    assert "spark=lakefeed.spark_session()" in done.stdout


def test_the_configuration_is_spark_conf_while_the_files_load(spark, tmp_path: Path) -> None:
    folder = write(
        tmp_path / "p",
        {
            "p.py": "import lakefeed as lf\n\n"
            "LIMIT = int(spark.conf.get('mypipeline.limit'))\n\n"
            "@lf.materialized_view\ndef few():\n    return spark.range(LIMIT)\n"
        },
    )
    loaded = entry.load(folder, {"mypipeline.limit": "3"}, spark=spark)
    assert spark.conf.get("mypipeline.limit") == "3" and list(loaded.datasets) == ["few"]
    try:
        with pytest.raises(PipelineError, match="PIPELINE_CONF_FIXED") as caught:
            entry.load(
                folder, {"mypipeline.limit": "3", "spark.executor.memory": "3g"}, spark=spark
            )
    finally:
        set_config({})  # the refused setting stays out of the next test's pipelines
    assert "--spark-conf" in str(caught.value)
