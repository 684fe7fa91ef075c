"""lakefeed on a real Spark standalone cluster (a master and two 1-core workers on 127.0.0.1).

The driver runs in its own process (``lakefeed verify --master spark://…``), executors are the
workers' JVMs with their own Python workers, which import the lakefeed zip the driver ships.
One cluster serves the whole module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lakefeed.core.errors import ConfigError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.spark.cluster import BAD_SPARK_CONF, UNREACHABLE, check_master, parse_spark_conf
from tests.connectors.kafka.broker import Tansu
from tests.pipeline.support import IOT, table
from tests.support.cluster import Cluster
from tests.support.crash import DRIVER_JVM, run_cli_with_kills, spark_commits
from tests.support.net import free_port
from tests.support.s3 import MotoServer
from tests.support.verify import conf_args

ROWS = 600
CONF = {
    "iot.totalRows": str(ROWS),
    "iot.rowsPerSecond": "2",
    "iot.devices": "8",
    "iot.startTime": "2026-01-01T00:00:00Z",
    "iot.lateRate": "0",
    "iot.seed": "3",
    "iot.maxRowsPerTrigger": "150",
}
# A Kafka → Delta flow beside the IoT pipeline: 2,000 messages, 4 micro-batches of 500.
KAFKA_FLOW = Path(__file__).with_name("kafka_pipeline.py")
MESSAGES = 2000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = Cluster(tmp_path_factory.mktemp("spark-cluster")).start(workers=2)
    try:
        yield running
    finally:
        running.stop()


def _lakefeed(*args: str, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    env = {**DRIVER_JVM, **os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def test_spark_conf_must_be_spark_settings() -> None:
    assert parse_spark_conf(["spark.executor.memory=2g"]) == {"spark.executor.memory": "2g"}
    with pytest.raises(ConfigError) as refused:
        parse_spark_conf(["iot.devices=3"])
    assert refused.value.code == BAD_SPARK_CONF


def test_an_unreachable_master_is_refused_before_spark_starts() -> None:
    with pytest.raises(ConfigError) as refused:
        check_master(f"spark://127.0.0.1:{free_port()}", timeout=1)
    assert refused.value.code == UNREACHABLE


def _wait_for_a_commit(checkpoint: Path, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 600
    while spark_commits(checkpoint) < 1:
        assert proc.poll() is None, log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"no batch committed in {checkpoint}"
        time.sleep(0.2)


@pytest.mark.cluster
@pytest.mark.crash
@pytest.mark.timeout(900)
def test_iot_and_kafka_on_the_cluster_survive_killed_workers(
    cluster: Cluster, broker: Tansu, tmp_path: Path
) -> None:
    topic = broker.create_topic(2)
    values = [f"m{i}" for i in range(MESSAGES)]
    broker.produce(topic, values, keys=[str(i) for i in range(MESSAGES)])
    kafka = {"kafka.bootstrap": broker.bootstrap, "kafka.topic": topic}
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    log = tmp_path / "driver.log"
    # verify runs the flows one after the other (available-now), then compares each with batch
    proc = _lakefeed(
        "verify", str(IOT), str(KAFKA_FLOW), "--lakehouse", str(lakehouse.root),
        "--master", cluster.url, *("--spark-conf", "spark.executor.memory=512m"),
        *conf_args({**CONF, **kafka, "kafka.maxOffsetsPerTrigger": "500"}), log=log,
    )  # fmt: skip
    try:
        # kill -9 a worker mid-stream in each (its executor and Python workers die too); the
        # master starts the application an executor on the worker that replaces it
        for victim, flow in enumerate(("bronze_readings", "kafka_messages")):
            _wait_for_a_commit(lakehouse.checkpoint_path(flow), proc, log)
            cluster.kill_worker(victim)
            cluster.add_worker()
        assert proc.wait(timeout=600) == 0, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    bronze = table(lakehouse, "bronze_readings")
    assert bronze.num_rows == ROWS
    assert pc.count_distinct(bronze["offset"]).as_py() == ROWS
    messages = table(lakehouse, "kafka_messages").to_pylist()
    assert len({(m["partition"], m["offset"]) for m in messages}) == len(messages) == MESSAGES
    assert sorted(m["value"] for m in messages) == sorted(values)
    # sized to the cluster's two executor cores, not the local default (4)
    offsets = (lakehouse.checkpoint_path("silver_readings") / "offsets" / "0").read_text()
    assert json.loads(offsets.splitlines()[1])["conf"]["spark.sql.shuffle.partitions"] == "2"


@pytest.mark.cluster
@pytest.mark.crash
@pytest.mark.soak  # a second crash point: CI proves the cluster with its killed workers
@pytest.mark.timeout(900)
def test_a_driver_killed_on_the_cluster_restarts_exactly_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    args = ["run", str(IOT), "--lakehouse", str(lakehouse.root), "--master", cluster.url]
    bronze_checkpoint = lakehouse.checkpoint_path("bronze_readings")
    report = run_cli_with_kills(
        tmp_path,
        [*args, "--trigger-interval", "1 second", *conf_args(CONF)],
        kill_when=lambda _: spark_commits(bronze_checkpoint) >= 1,
        min_delay=300,
        max_delay=300,
        final_timeout=600,
        restarts=None,
    )
    assert report.kills == 1
    bronze = table(lakehouse, "bronze_readings")
    assert bronze.num_rows == ROWS
    assert pc.count_distinct(bronze["offset"]).as_py() == ROWS


@pytest.mark.cluster
@pytest.mark.soak  # a combination: CI proves the cluster and S3 each on its own
@pytest.mark.timeout(900)
def test_iot_on_the_cluster_with_its_lakehouse_on_s3(
    cluster: Cluster, moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Executors write the tables' Parquet files and read batches through S3A: the jars Spark
    # resolves for the driver must reach them (the first session resolves, later ones reuse).
    lakehouse = Lakehouse.at(f"s3://{moto.bucket()}/lh")
    log = tmp_path / "driver.log"
    proc = _lakefeed(
        "verify", str(IOT), "--lakehouse", str(lakehouse.root), "--master", cluster.url,
        *("--spark-conf", "spark.executor.memory=512m"), *conf_args(CONF), log=log,
        env=moto.env(),
    )  # fmt: skip
    assert proc.wait(timeout=600) == 0, log.read_text()[-4000:]
    assert moto.env()["AWS_SECRET_ACCESS_KEY"] not in log.read_text()
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    bronze = table(lakehouse, "bronze_readings")
    assert bronze.num_rows == ROWS
    assert pc.count_distinct(bronze["offset"]).as_py() == ROWS
