"""lakefeed through a real Spark Connect server (pyspark's own jars, 127.0.0.1, ``local[2]``).

lakefeed's process is only a gRPC client here: the queries, the Python data sources and every
``foreachBatch`` body run in the server. One server serves the module; one pipeline run (killed
once, then finished) serves every assertion.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from lakefeed.cli.main import cli
from lakefeed.core.lakehouse import Lakehouse
from tests.pipeline.support import IOT, table
from tests.spark.cluster.test_standalone import CONF, ROWS
from tests.support.connect import ConnectServer
from tests.support.crash import run_cli_with_kills, spark_commits
from tests.support.verify import conf_args

pytestmark = [pytest.mark.connect, pytest.mark.crash]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    running = ConnectServer(tmp_path_factory.mktemp("spark-connect")).start()
    try:
        yield running
    finally:
        running.stop()


def _lakefeed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.timeout(900)
def test_a_client_killed_mid_stream_restarts_exactly_once(
    server: ConnectServer, tmp_path: Path
) -> None:
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    args = ["run", str(IOT), "--lakehouse", str(lakehouse.root), "--remote", server.url]
    report = run_cli_with_kills(
        tmp_path,
        [*args, "--trigger-interval", "1 second", *conf_args(CONF)],
        kill_when=lambda _: spark_commits(lakehouse.checkpoint_path("bronze_readings")) >= 1,
        min_delay=300,
        max_delay=300,
        final_timeout=600,
        restarts=None,
    )
    assert report.kills == 1, server.tail()
    bronze = table(lakehouse, "bronze_readings")
    assert bronze.num_rows == ROWS
    assert pc.count_distinct(bronze["offset"]).as_py() == ROWS

    # the batch recompute, also through Connect, finds the stream's rows, no more, no less
    verified = _lakefeed(
        "verify", str(IOT), "--lakehouse", str(lakehouse.root), "--remote", server.url,
        "--no-run", *conf_args(CONF),
    )  # fmt: skip
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    assert "equal" in verified.stdout

    status = CliRunner().invoke(cli, ["status", "--lakehouse", str(lakehouse.root)])
    assert f"Spark Connect {server.url} · Delta reader python" in status.output, status.output


# A pipeline doing Spark work at import (issue 32): under Connect the session it gets is the
# client's session on the server, created before the file is imported.
MODULE_LEVEL_SPARK = """
import dlt
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, expr

spark = SparkSession.active()
KINDS = [row.kind for row in spark.sql("SELECT 'U' AS kind UNION ALL SELECT 'D'").collect()]
ROWS_PER_SECOND = spark.conf.get("mypipeline.rate")

@dlt.view
def changes():
    return (spark.readStream.format("rate").option("rowsPerSecond", ROWS_PER_SECOND).load()
            .selectExpr("value % 10 AS id", "value AS seq", f"'{KINDS[0]}' AS op"))

dlt.create_streaming_table("current")

dlt.create_auto_cdc_flow(
    target="current",
    source="changes",
    keys=[col("id")],
    sequence_by=col("seq"),
    apply_as_deletes=expr("op = 'D'"),
    except_column_list=["op"],
)
"""


def test_module_level_spark_calls_run_on_the_connect_session(
    server: ConnectServer, tmp_path: Path
) -> None:
    (tmp_path / "pipeline").mkdir()
    (tmp_path / "pipeline" / "cdc.py").write_text(MODULE_LEVEL_SPARK)
    checked = _lakefeed(
        "validate", str(tmp_path / "pipeline"), "--lakehouse", str(tmp_path / "lh"),
        "--remote", server.url, "--conf", "mypipeline.rate=5", "--json",
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert '"valid": true' in checked.stdout
