"""The web UI and ``/metrics``: a Starlette app served by uvicorn in a background thread.

Everything it shows comes from the lakehouse folder (the event log and the Delta tables), so
the same server works beside a running pipeline (``lakefeed run ... --ui``), for one running in
another process (``lakefeed ui``), and for one that has stopped.

Access: on a loopback address anyone on the machine may look, as with Spark's own UI. On any
other address a token is required (``start_server`` refuses to start without one); clients send
it as ``Authorization: Bearer <token>`` or once as ``?token=<token>``, which sets an HttpOnly
cookie so the page's own requests carry it. The token is compared in constant time and never
logged (uvicorn's access log, which would print query strings, is off). A token must be worth
guessing against: at least ``MIN_TOKEN_CHARS`` characters without spaces and not one character
repeated; :func:`new_token` makes one (``lakefeed ui --generate-token``).
"""

from __future__ import annotations

import hmac
import ipaddress
import math
import secrets
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from lakefeed.core.errors import CheckpointError, ConfigError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.logs import get_logger
from lakefeed.core.redact import redact_text
from lakefeed.core.storage import Location
from lakefeed.observe.errors import WEAK_TOKEN
from lakefeed.observe.graph import layout, with_sources
from lakefeed.observe.prom import render_metrics
from lakefeed.observe.tables import TableReader, TableViewError
from lakefeed.observe.tail import LiveMonitor, event_record
from lakefeed.runtime.state import flow_checkpoint, inspect_state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STATIC = Path(__file__).parent / "static"
COOKIE = "lakefeed_token"
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIN_TOKEN_CHARS = 16
STATE_POOL = "lakefeed-ui-state"  # the state reader's Spark jobs wait for no flow, nor it for them
STATE_CACHE_SECONDS = 5.0

log = get_logger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
SessionFactory = Callable[[], "SparkSession"]
"""Gives the session the state reader runs on (the running pipeline's, if any)."""


def plain_session() -> SparkSession:
    """A plain session for Spark's state readers, the default :data:`SessionFactory`; the
    ``lakefeed`` command passes one with lakefeed's connectors, as its other sessions have."""
    from lakefeed.spark.session import spark_session  # Spark loads on the first state request

    return spark_session(app_name="lakefeed-ui")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    """A fresh random UI token (URL-safe, 32 characters)."""
    return secrets.token_urlsafe(24)


def check_token(token: str) -> str:
    """``token`` if it is strong enough to guard the UI, else a :class:`ConfigError` saying why."""
    weak = (
        len(token) < MIN_TOKEN_CHARS
        or any(c.isspace() or not c.isprintable() for c in token)
        or len(set(token)) < 4
    )
    if weak:
        raise ConfigError(
            f"the UI token is too weak: use at least {MIN_TOKEN_CHARS} characters, no spaces, "
            "not one character repeated",
            fix="use the output of: python -c 'import secrets; print(secrets.token_urlsafe(24))' "
            "(lakefeed ui --generate-token makes one and prints it)",
            code=WEAK_TOKEN,
        )
    return token


class TokenAuth:
    """ASGI middleware: every request must present the token (header, query or cookie)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = check_token(token).encode()

    def _matches(self, supplied: str | None) -> bool:
        return supplied is not None and hmac.compare_digest(supplied.encode(), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        header = request.headers.get("authorization", "")
        bearer = header[7:].strip() if header.lower().startswith("bearer ") else None
        from_query = request.query_params.get("token")
        if not (self._matches(bearer) or self._matches(request.cookies.get(COOKIE))):
            if not self._matches(from_query):
                response = PlainTextResponse(
                    "lakefeed UI: token required. Open the page as /?token=<token> or send "
                    "'Authorization: Bearer <token>'.",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
            send = self._setting_cookie(send)
        await self.app(scope, receive, send)

    def _setting_cookie(self, send: Send) -> Send:
        cookie = SimpleCookie()
        cookie[COOKIE] = self._token.decode()
        cookie[COOKIE]["httponly"] = True
        cookie[COOKIE]["samesite"] = "Strict"
        cookie[COOKIE]["path"] = "/"
        header = cookie.output(header="").strip().encode()

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"set-cookie", header)]
            await send(message)

        return wrapped


class UIApi:
    """The JSON endpoints; one instance per server, shared by its request threads."""

    def __init__(self, lakehouse: Lakehouse, spark: SessionFactory = plain_session) -> None:
        self.lakehouse = lakehouse
        self._spark = spark
        self.live = LiveMonitor(lakehouse.event_log_path)
        self.tables = TableReader(lakehouse)
        self._state_lock = threading.Lock()  # one state read at a time; the others get its answer
        self._state_cache: dict[tuple[str, int], tuple[float, dict[str, Any]]] = {}

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    def state(self, request: Request) -> Response:
        series = request.query_params.get("series", "*")
        snapshot = self.live.refresh().snapshot(time.time(), series)
        for pipeline in snapshot["pipelines"]:
            sources = {f["name"]: f["sources"] for f in pipeline["flows"]}
            pipeline["layout"] = layout(with_sources(pipeline["graph"], sources))
            for quality in pipeline["tables"]:
                found = self.tables.quarantine(quality["table"])
                quality["quarantine_table"], quality["quarantine_rows"] = found or (None, None)
        return JSONResponse(snapshot)

    def events(self, request: Request) -> Response:
        limit = _int(request, "limit", 100)
        self.live.refresh()
        events = list(self.live.recent)[-limit:]
        return JSONResponse([event_record(e) for e in reversed(events)])

    def table_list(self, request: Request) -> Response:
        return JSONResponse(self.tables.summaries())

    def table(self, request: Request) -> Response:
        name = request.path_params["name"]
        summary = self.tables.summary(name)
        order_by = request.query_params.get("order_by") or None
        summary["latest"] = self.tables.latest_rows(name, _int(request, "limit", 20), order_by)
        return JSONResponse(summary)

    def chart(self, request: Request) -> Response:
        q = request.query_params
        if not q.get("time") or not q.get("measure"):
            raise TableViewError("chart needs ?time=<column>&measure=<column>")
        return JSONResponse(
            self.tables.chart(
                request.path_params["name"],
                time=q["time"],
                measure=q["measure"],
                agg=q.get("agg", "avg"),
                bucket_s=_seconds(request, "bucket_s"),
                points=_int(request, "points", 500),
            )
        )

    def flow_state(self, request: Request) -> Response:
        """What ``lakefeed state FLOW`` shows, as JSON (404 for a flow without a checkpoint)."""
        flow = request.path_params["flow"]
        limit = min(_int(request, "limit", 5), 50)
        try:
            flow_checkpoint(self.lakehouse, flow)
        except CheckpointError as error:
            return JSONResponse({"error": redact_text(str(error))}, status_code=404)
        with self._state_lock:
            cached = self._state_cache.get((flow, limit))
            if cached is None or time.monotonic() - cached[0] > STATE_CACHE_SECONDS:
                cached = (time.monotonic(), self._read_state(flow, limit))
                self._state_cache[(flow, limit)] = cached
        return JSONResponse(cached[1])

    def _read_state(self, flow: str, limit: int) -> dict[str, Any]:
        """Spark's state readers on the checkpoint (read-only), in their own scheduler pool. A
        checkpoint a batch is writing right now may not read yet: the answer says so."""
        from lakefeed.runtime.pools import flow_pool  # Spark loads on the first state request

        spark = self._spark()
        try:
            with flow_pool(spark, STATE_POOL):
                return inspect_state(spark, self.lakehouse, flow, limit).to_json()
        except Exception as error:  # noqa: BLE001 - a partial checkpoint is a normal moment
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            return {
                "flow": flow,
                "operators": [],
                "error": redact_text(f"the state of {flow} cannot be read now: {first}"),
                "fix": "retry in a moment (a batch may be writing it), or run: "
                f"lakefeed state {flow}",
            }

    def metrics(self, request: Request) -> Response:
        body = render_metrics(self.live.refresh)
        return Response(body, media_type=PROMETHEUS_CONTENT_TYPE)


def _int(request: Request, name: str, default: int, minimum: int = 1) -> int:
    """Query parameter ``name`` as a whole number ≥ ``minimum`` (bad input: a 400 saying why)."""
    value = request.query_params.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError as e:
        raise TableViewError(f"{name} must be a whole number, not {value!r}") from e
    if number < minimum:
        raise TableViewError(f"{name} must be at least {minimum}, not {number}")
    return number


def _seconds(request: Request, name: str) -> float:
    """Query parameter ``name`` as a finite number of seconds ≥ 0 (absent: 0)."""
    value = request.query_params.get(name) or "0"
    try:
        number = float(value)
    except ValueError as e:
        raise TableViewError(f"{name} must be a number of seconds, not {value!r}") from e
    if not math.isfinite(number) or number < 0:
        raise TableViewError(f"{name} must be a finite number of seconds ≥ 0, not {value!r}")
    return number


async def _bad_request(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": redact_text(str(exc))}, status_code=400)


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("UI request failed: %s", request.url.path)
    return JSONResponse({"error": redact_text(f"{type(exc).__name__}: {exc}")}, status_code=500)


def create_app(
    lakehouse: Lakehouse, token: str | None = None, spark: SessionFactory = plain_session
) -> ASGIApp:
    api = UIApi(lakehouse, spark)
    app = Starlette(
        routes=[
            Route("/", api.index),
            Route("/favicon.ico", lambda request: Response(status_code=204)),
            Route("/api/state", api.state),
            Route("/api/events", api.events),
            Route("/api/state/{flow}", api.flow_state),
            Route("/api/tables", api.table_list),
            Route("/api/tables/{name}", api.table),
            Route("/api/tables/{name}/chart", api.chart),
            Route("/metrics", api.metrics),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={TableViewError: _bad_request, Exception: _server_error},
    )
    return TokenAuth(app, token) if token else app


@dataclass
class ServerHandle:
    """A running UI server. ``url`` never contains the token."""

    url: str
    host: str
    port: int
    _server: uvicorn.Server
    _thread: threading.Thread

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)

    def wait(self) -> None:
        """Block until the server stops (Ctrl-C stops it)."""
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            self.stop()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as e:
        raise OSError(f"cannot serve the UI on {host}:{port}: {e.strerror or e}") from e


def start_server(
    lakehouse: Lakehouse | Location,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    spark: SessionFactory = plain_session,
) -> ServerHandle:
    """Serve the UI and ``/metrics`` for ``lakehouse`` in a daemon thread (``port=0``: any free).
    ``spark`` gives the session flows' state is read on, on the first such request.

    Refuses a non-loopback ``host`` without a token, and any weak token: the UI shows table
    contents and errors.
    """
    if token is not None:
        check_token(token)
    elif not is_loopback(host):
        raise ValueError(
            f"serving the UI on {host} exposes pipeline data to the network: set a token "
            "(--token or LAKEFEED_UI_TOKEN, or --generate-token), or bind to 127.0.0.1"
        )
    if not isinstance(lakehouse, Lakehouse):
        lakehouse = Lakehouse.at(lakehouse)
    sock = _bind(host, port)
    config = uvicorn.Config(
        create_app(lakehouse, token, spark),
        log_level="warning",
        access_log=False,
        log_config=None,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="lakefeed-ui", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise RuntimeError(f"the UI server on {host}:{port} did not start")
        time.sleep(0.02)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/"
    log.info("lakefeed UI serving %s", lakehouse.root, extra={"url": url})
    return ServerHandle(url, host, bound, server, thread)
