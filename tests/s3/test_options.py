"""S3 settings given only as options of a read or write (as delta-spark and Spark's file
sources take them), against moto: the driver's environment points at a wrong endpoint, so only
the options can reach the server — in the driver, Spark's Python planner processes and the
executors' Python workers (the settings travel with the pickled readers and writers)."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakefeed import storage
from lakefeed.delta import DeltaTable
from tests.support.s3 import MotoServer, free_port

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
