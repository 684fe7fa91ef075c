"""A real Spark Connect server for tests, from pyspark's own jars (``spark-connect_2.13``).

``bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer`` bound to
127.0.0.1 on a free port, on ``local[2]``, in its own process group. Its Python workers (the
data sources' readers and writers, ``foreachBatch`` functions) must import this checkout's
lakefeed: the repository root goes on their ``PYTHONPATH`` and ``PYSPARK_PYTHON`` is the test
interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.support.cluster import _kill
from tests.support.net import free_port

SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
REPOSITORY = Path(__file__).resolve().parents[2]


@dataclass
class ConnectServer:
    """A Spark Connect server at ``url``, logging into ``folder``/connect.log."""

    folder: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "connect.log"

    def start(self, master: str = "local[2]") -> ConnectServer:
        path = os.pathsep.join(p for p in (str(REPOSITORY), os.environ.get("PYTHONPATH")) if p)
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": path,
        }
        env.pop("SPARK_HOME", None)  # pyspark's bin/ finds its own
        env.pop("SPARK_REMOTE", None)
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.python.authenticate.socketTimeout": "120s",
            "spark.scheduler.mode": "FAIR",
        }
        args = [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(SPARK_SUBMIT), "--master", master, "--class", SERVER_CLASS, *args],
                cwd=self.folder,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 180.0) -> None:
        """Ready when the server logs that it listens (the port opens a little earlier)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.tail()
            if "Spark Connect server started" in self.log.read_text(errors="replace"):
                return
            time.sleep(0.3)
        raise AssertionError(f"no Spark Connect server on {self.url} after {timeout} s")

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.process is not None:
            _kill(self.process)
