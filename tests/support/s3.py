"""A real S3-API server for the tests: moto's standalone server (PyPI ``moto[server]``) on
127.0.0.1, in memory, started once and stopped by its pid.

:func:`s3_env` is what a process needs to reach it: the standard AWS variables, which delta-rs,
pyarrow (through :mod:`lakefeed.core.storage`) and Hadoop's S3A all read.
"""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow.fs as pafs

from tests.support.net import free_port, listening

_REQUEST = re.compile(
    r'"(?:\x1b\[[\d;]*m)*(?P<method>[A-Z]+) (?P<target>\S+) HTTP/[\d.]+(?:\x1b\[[\d;]*m)*" '
    r"(?P<status>\d{3})"
)


def access_log(lines: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """(method, target, status) of each request in moto's access log (werkzeug's lines, e.g.
    ``"PUT /bucket/key HTTP/1.1" 200 -``; it colours 4xx and 206 lines with terminal codes)."""
    for line in lines:
        match = _REQUEST.search(line)
        if match is not None:
            yield match["method"], match["target"], match["status"]


class MotoServer:
    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "lakefeed-test",
            "AWS_SECRET_ACCESS_KEY": "lakefeed-test-secret",
            "AWS_ALLOW_HTTP": "true",
        }

    def start(self) -> MotoServer:
        if importlib.util.find_spec("moto") is None:
            raise RuntimeError("moto is missing: pip install 'moto[server]' (lakefeed[dev])")
        # ``python -m moto.server``, not the ``moto_server`` script: a venv's console scripts
        # keep the interpreter path they were installed with in their first line.
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=out)
        if listening(self.port, 30):
            return self
        self.stop()
        raise RuntimeError(f"moto_server did not start: {self.log.read_text()[-2000:]}")

    def bucket(self, prefix: str = "lakefeed") -> str:
        """A fresh bucket; its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        url = self.endpoint.removeprefix("http://")
        fs = pafs.S3FileSystem(
            endpoint_override=url,
            scheme="http",
            access_key="lakefeed-test",
            secret_key="lakefeed-test-secret",
            region="us-east-1",
            allow_bucket_creation=True,
        )
        fs.create_dir(name)
        return name

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
