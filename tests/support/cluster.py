"""A real Spark standalone cluster for tests: one master and workers, from pyspark's own jars.

Each daemon is ``bin/spark-class org.apache.spark.deploy.{master.Master,worker.Worker}`` bound to
127.0.0.1, in its own process group so a test can kill -9 one worker (its executor JVM and
Python workers die with it) and start it again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from tests.support.net import free_port

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"


@dataclass
class Cluster:
    """A master at ``url`` and its workers, logging into ``folder``."""

    folder: Path
    port: int = field(default_factory=free_port)
    master: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
        env.pop("SPARK_HOME", None)  # pyspark's bin/ finds its own
        work = self.folder / name
        work.mkdir(parents=True, exist_ok=True)
        with (self.folder / f"{name}.log").open("ab") as log:
            return subprocess.Popen(
                [str(SPARK_CLASS), *args],
                cwd=work,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def start(self, workers: int = 2) -> Cluster:
        self.master = self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(self.port), "--webui-port", "0"),
        )
        _wait_port(self.port, self.master)
        for _ in range(workers):
            self.add_worker()
        return self

    def add_worker(self) -> subprocess.Popen[bytes]:
        index = len(self.workers)
        worker = self._spawn(
            f"worker{index}",
            "org.apache.spark.deploy.worker.Worker",
            self.url,
            *("--host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", "0"),
            *("--work-dir", str(self.folder / f"worker{index}" / "work")),
        )
        self.workers.append(worker)
        return worker

    def kill_worker(self, index: int) -> None:
        """kill -9 the worker and everything it started (executor JVM, Python workers)."""
        _kill(self.workers[index])

    def stop(self) -> None:
        for proc in [*self.workers, self.master]:
            if proc is not None:
                _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the Spark master exited at start"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.2)
    raise AssertionError(f"no Spark master on port {port} after {timeout} s")
