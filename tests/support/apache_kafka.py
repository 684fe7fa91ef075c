"""Apache Kafka itself as the tests' reference broker: a single KRaft node (broker and
controller in one JVM) on 127.0.0.1, beside tansu (:mod:`tests.connectors.kafka.broker`).

tansu answers the Kafka protocol but does not model everything Apache Kafka does (the last
stable offset of ``read_committed`` readers, topic ids of recreated topics, transactions that
survive a broker restart); connector behaviour that depends on them is tested here.

The broker's jars come from Maven Central through Maven itself (``mvn
dependency:copy-dependencies`` over ``apache_kafka/pom.xml``), once, into lakefeed's cache folder
(``~/.cache/lakefeed/apache-kafka-<pom digest>/libs``, 43 MB), as Spark's Ivy cache holds the S3A
jars (:mod:`lakefeed.spark.s3a`); later sessions reuse them. A changed pom gets a new folder.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from lakefeed.spark.home import cache_root
from tests.connectors.kafka.broker import Broker
from tests.support.net import free_port

POM = Path(__file__).with_name("apache_kafka") / "pom.xml"
HEAP = "-Xmx512m"

SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    # A transaction past its timeout is aborted within a second (default: every 10 s), so
    # timeout tests wait for the timeout, not for the broker's sweep.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}


def kafka_libs() -> Path:
    """The broker's jars, fetched by Maven on first use and kept in lakefeed's cache folder."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:10]
    home = Path(cache_root()) / f"apache-kafka-{digest}"
    libs = home / "libs"
    if libs.is_dir():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Apache Kafka's jars are fetched by Maven: install mvn (Maven 3)")
    staging = home.with_name(f"{home.name}.{os.getpid()}")
    fetched = subprocess.run(
        [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
         f"-DoutputDirectory={staging / 'libs'}"],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    if fetched.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"mvn could not fetch Apache Kafka:\n{fetched.stdout[-3000:]}")
    try:
        staging.rename(home)  # atomic: a concurrent first run keeps whichever came first
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return libs


def cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 (``kafka-storage random-uuid``)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ApacheKafka(Broker):
    """One KRaft node (``kafka.Kafka``) on 127.0.0.1 with its data under ``home``; stopped by
    its PID. ``restart()`` keeps the data and ports (a broker restart, as an operator does)."""

    name = "apache_kafka"

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.controller_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / "broker.log"

    def _java(self, *args: str) -> list[str]:
        java = (
            os.path.join(os.environ["JAVA_HOME"], "bin", "java")
            if "JAVA_HOME" in os.environ
            else "java"
        )
        return [java, HEAP, "-cp", str(kafka_libs() / "*"), *args]

    def _configure(self) -> Path:
        """server.properties, and the storage formatted once (``kafka-storage format``)."""
        config = self.home / "server.properties"
        if config.exists():
            return config
        settings = {
            **SETTINGS,
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},"
            f"CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.home / "data"),
        }
        config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        formatted = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(config)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if formatted.returncode != 0:
            raise RuntimeError(
                f"kafka-storage format failed:\n{formatted.stdout}{formatted.stderr}"
            )
        return config

    def start(self) -> ApacheKafka:
        self.home.mkdir(parents=True, exist_ok=True)
        config = self._configure()
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(config)), stdout=out, stderr=subprocess.STDOUT
            )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 90.0) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + timeout
        while True:
            try:
                if admin.list_topics(timeout=1).brokers:
                    return
            except KafkaException:
                pass
            if time.monotonic() > deadline or (self.proc and self.proc.poll() is not None):
                self.stop()
                raise RuntimeError(f"Apache Kafka did not start; log:\n{self.log.read_text()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM (the broker's controlled shutdown), SIGKILL after 30 s."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
