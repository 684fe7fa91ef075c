"""A fault-injecting HTTP proxy in front of the moto S3 server, on 127.0.0.1 only.

Every S3 client lakefeed uses (delta-rs, pyarrow, Spark's S3A, boto3) reaches storage through
``AWS_ENDPOINT_URL``; pointing it at this proxy puts every request in front of a
:class:`~tests.support.faults.PlanFile`, which may fail it (HTTP 500/503 with an S3 error body,
as S3 answers when it sheds load), delay it, or cut a GET's body short (the connection closes
before ``Content-Length`` bytes came, as a dropped connection does). Everything else is passed
on byte for byte, with the client's ``Host`` header, so signatures stay what the client signed.

It runs as its own process (``python -m tests.support.s3faults``): clients that block inside
native code with Python's lock held (delta-rs, the JVM) must never wait on a thread of their
own process.
"""

from __future__ import annotations

import argparse
import http.client
import signal
import socket
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.faults import PlanFile, classify_s3
from tests.support.net import free_port, listening

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection"}
ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
    "<Message>injected fault</Message><RequestId>fault</RequestId></Error>"
)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FaultServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib's name
        pass

    def do_GET(self) -> None:
        self.relay()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    def body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def relay(self) -> None:
        payload = self.body()
        split = urlsplit(self.path)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        op = classify_s3(self.command, split.path, split.query, headers)
        fault = self.server.plan.decide(op, split.path)
        if fault is not None and fault.action == "fail":
            self.refuse(fault.status)
            return
        if fault is not None and fault.action == "delay":
            time.sleep(fault.delay)
        status, reason, answer, data = self.forward(payload, headers)
        self.send_response(status, reason)
        for key, value in answer:
            if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                self.send_header(key, value)
        if self.command == "HEAD":  # a HEAD's length is the object's: pass it on
            self.send_header("Content-Length", dict(answer).get("Content-Length", "0"))
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault is not None and fault.action == "truncate" and len(data) > 1:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)

    def forward(
        self, payload: bytes, headers: dict[str, str]
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=120)
        try:
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for key, value in headers.items():
                if key.lower() != "content-length":
                    upstream.putheader(key, value)
            upstream.putheader("Content-Length", str(len(payload)))
            upstream.endheaders(payload)
            response = upstream.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            upstream.close()

    def refuse(self, status: int) -> None:
        body = b"" if self.command == "HEAD" else self.error_body(status)
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    @staticmethod
    def error_body(status: int) -> bytes:
        code = "SlowDown" if status == 503 else "InternalError"
        return ERROR_BODY.format(code=code).encode()


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, upstream_port: int, plan: PlanFile) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.upstream_port = upstream_port
        self.plan = plan


class S3FaultProxy:
    """The proxy as a child process: ``endpoint`` replaces moto's in a client's environment."""

    def __init__(self, upstream: str, plan: Path, log: Path) -> None:
        self.upstream = upstream
        self.plan = plan
        self.log = log
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> S3FaultProxy:
        command = [sys.executable, "-m", "tests.support.s3faults", self.upstream,
                   str(self.port), str(self.plan)]  # fmt: skip
        root = Path(__file__).resolve().parents[2]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=out, cwd=root)
        if listening(self.port, 20, poll=0.05):
            return self
        self.stop()
        raise RuntimeError(f"the S3 fault proxy did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("upstream", help="the S3 server, e.g. http://127.0.0.1:5000")
    parser.add_argument("port", type=int)
    parser.add_argument("plan", type=Path)
    args = parser.parse_args()
    plan = PlanFile(args.plan)
    server = FaultServer(args.port, urlsplit(args.upstream).port or 80, plan)
    signal.signal(signal.SIGTERM, lambda *_: (plan.write_counts(), sys.exit(0)))
    server.serve_forever()


if __name__ == "__main__":
    main()
