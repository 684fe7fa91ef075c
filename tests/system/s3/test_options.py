"""S3 settings given only as options of a read or write (as delta-spark and Spark's file
sources take them), against moto: the driver's environment points at a wrong endpoint, so only
the options can reach the server — in the driver, Spark's Python planner processes and the
executors' Python workers (the settings travel with the pickled readers and writers)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.core import storage
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.event_log import read_events
from tests.support.net import free_port
from tests.support.s3 import MotoServer

SECRET = "only-in-options-7d3e"
PYTHON = {"lakefeed.writer": "python", "lakefeed.reader": "python"}
"""The shared test session has no S3A: lakefeed's own clients do every read and write."""


@pytest.fixture
def options(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setattr(storage, "_REGISTERED", {})
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nobody there
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    return {
        "fs.s3a.endpoint": moto.endpoint.removeprefix("http://"),  # S3A's host:port form
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.endpoint.region": "us-east-1",
        "fs.s3a.access.key": "options-key",
        "fs.s3a.secret.key": SECRET,
    }


def test_delta_reads_and_writes_with_settings_only_in_options(
    spark, moto: MotoServer, options: dict[str, str], tmp_path: Path, caplog
) -> None:
    caplog.set_level(logging.DEBUG, logger="lakefeed")
    bucket = moto.bucket()
    target = f"s3://{bucket}/orders"
    frame = spark.createDataFrame([(i, f"o{i}") for i in range(10)], "id long, name string")
    frame.write.format("delta").options(**options, **PYTHON).mode("append").save(target)
    back = spark.read.format("delta").options(**options, **PYTHON).load(target)
    assert sorted(r.id for r in back.collect()) == list(range(10))

    source = str(tmp_path / "source")
    write_deltalake(source, pa.table({"id": list(range(100, 105)), "name": ["s"] * 5}))
    query = (
        spark.readStream.format("delta")
        .load(source)
        .writeStream.format("delta")
        .options(**options, **PYTHON)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(target)
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert SECRET not in str(query.lastProgress)

    table = DeltaTable.forPath(spark, target, hadoopConf=options)
    assert len(table.history().collect()) == 2  # the write and the stream's batch
    reread = spark.read.format("delta").options(**options, **PYTHON)
    assert reread.load(target).count() == 15
    table.delete("id >= 100")
    assert reread.load(target).count() == 10
    assert table.detail().first()["location"] == target
    storage._REGISTERED.clear()  # a fresh process: reads need the options again
    again = DeltaTable.forPath(spark, target, hadoopConf=options)
    assert again.detail().first()["numFiles"] >= 1
    with pytest.raises(Exception, match="hadoopConf takes Hadoop file system settings only"):
        DeltaTable.forPath(spark, target, hadoopConf={"spark.sql.x": "1"})
    assert SECRET not in repr(again) and SECRET not in caplog.text
    assert SECRET not in back._jdf.queryExecution().toString()


PIPELINE = """
import lakefeed as lf

@lf.table
def bronze_events():
    return lf.read_files("s3://{bucket}/landing", "json", schema="id BIGINT", **{options!r})
"""


@pytest.mark.timeout(600)
def test_run_with_a_local_lakehouse_reads_an_s3_landing_folder_with_option_settings(
    moto: MotoServer, options: dict[str, str], tmp_path: Path
) -> None:
    # The session must get S3A for a landing folder only a flow function names (issue 16 item
    # 3); Spark's reader parses the files through S3A with the options as per-read settings,
    # lakefeed's file log on S3 uses them too; no secret reaches the logs or the event log.
    bucket = moto.bucket()
    landed = {f"{bucket}/landing/2026/e{i}.json": f'{{"id": {i}}}\n' for i in range(3)}
    fs = pafs.S3FileSystem(
        endpoint_override=moto.endpoint.removeprefix("http://"), scheme="http",
        access_key="k", secret_key="s", region="us-east-1",
    )  # fmt: skip
    for key, text in landed.items():
        with fs.open_output_stream(key) as out:
            out.write(text.encode())
    flow = tmp_path / "pipeline.py"
    schemas = {"cloudFiles.schemaLocation": f"s3://{bucket}/schemas/bronze_events"}
    flow.write_text(PIPELINE.format(bucket=bucket, options={**options, **schemas}))
    lakehouse = Lakehouse.at(tmp_path / "lh")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    command = [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", "run",
               str(flow), "--mode", "available-now", "--lakehouse", str(lakehouse.root),
               "--master", "local[2]", "--spark-conf", "spark.ui.enabled=false"]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=500)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    bronze = RsTable(str(lakehouse.table_path("bronze_events"))).to_pyarrow_table()
    assert sorted(bronze["id"].to_pylist()) == [0, 1, 2]
    events = str(read_events(lakehouse.event_log_path))
    assert "read by Spark's reader" in events  # the session had S3A: Spark parsed the files
    assert SECRET not in events and SECRET not in output
