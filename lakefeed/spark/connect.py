"""Running through a Spark Connect server (``lakefeed run --remote sc://HOST:PORT``).

Under Spark Connect the driver is the server: lakefeed's process is a thin gRPC client with no
JVM, no SparkContext and no Py4J. What that changes, in one place:

- lakefeed's Python data sources (``delta``, ``cloudFiles``, ``lakefeed_kafka``,
  ``lakefeed_iot``) are registered over Connect (``spark.dataSource.register`` ships them to the
  server); their readers and writers, and every ``foreachBatch`` body, run in the server's Python
  workers, which must import lakefeed, pyarrow and deltalake (install them next to the server,
  or put lakefeed on the server's ``PYTHONPATH``);
- the planned Delta source (:mod:`lakefeed.spark.jvm`) is planned over Py4J from the client, so it
  cannot run: Delta tables are read by the Python reader (:func:`delta_reader` says which);
- settings the server fixes at start (``spark.scheduler.mode``, ``spark.jars``…) cannot be set
  from the client: :func:`apply_conf` sets the session settings and reports the others;
- what lakefeed reads from the analysed plan over Py4J it reads from the server's printed plan
  (:mod:`lakefeed.spark.plan_text`); ``foreachBatch`` starts are retried when the server's
  Python process is late (:func:`start_query`).

The StreamingQueryListener runs on the client in Connect (Spark 4), so the event log, the UI and
``lakefeed status`` keep their progress figures (:func:`_keep_listener_alive` works around a
pyspark 4.3 client bug that would drop it). docs/cluster.md lists what changes for users.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from urllib.parse import urlparse

from lakefeed.core.errors import ConfigError
from lakefeed.spark.errors import BOTH_TARGETS, MISSING_CLIENT
from lakefeed.spark.errors import CONNECT_UNREACHABLE as UNREACHABLE
from lakefeed.spark.jvm import bridge

log = logging.getLogger(__name__)


WORKER_LATE = "Python worker failed to connect back"
T = TypeVar("T")

PYTHON_READER = "python"
PLANNED_READER = "jvm-planned"
DEFAULT_PORT = 15002


def remote_url(remote: str | None, master: str | None) -> str | None:
    """The Connect URL to use: ``--remote``, else ``SPARK_REMOTE`` (pyspark's variable).

    A ``--master`` and a remote together are refused: the server owns the master.
    """
    url = remote or (None if master else os.environ.get("SPARK_REMOTE"))
    if url and master:
        raise ConfigError(
            f"both --master {master} and --remote {url} were given",
            fix="drop --master: a Spark Connect server runs on its own master "
            "(start it with --master)",
            code=BOTH_TARGETS,
        )
    return url


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (a gRPC client with no JVM of its own)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def check_server(url: str, timeout: float = 5.0) -> None:
    """Fail clearly when nothing answers at ``url`` (the client would retry for minutes)."""
    parsed = urlparse(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise ConfigError(
            f"{url!r} is not a Spark Connect URL",
            fix="write --remote sc://HOST:PORT (port 15002 by default)",
            code=UNREACHABLE,
        )
    try:
        with socket.create_connection((parsed.hostname, parsed.port or DEFAULT_PORT), timeout):
            return
    except OSError as exc:
        raise ConfigError(
            f"no Spark Connect server answers at {url} ({exc})",
            fix="start one (pyspark's sbin/start-connect-server.sh, see docs/cluster.md) "
            "or fix --remote / SPARK_REMOTE",
            code=UNREACHABLE,
        ) from None


def check_client() -> None:
    """The Connect client's own dependencies (``pyspark[connect]``) must be importable."""
    try:
        import grpc  # noqa: F401
        import grpc_status  # noqa: F401
        import zstandard  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"the Spark Connect client cannot start: {exc}",
            fix="pip install 'lakefeed[connect]' (grpcio, grpcio-status, zstandard, "
            "googleapis-common-protos)",
            code=MISSING_CLIENT,
        ) from None


def connect_session(
    url: str, app_name: str, conf: Mapping[str, str], given: Mapping[str, str] | None = None
) -> Any:
    """A Connect session on ``url`` with ``conf`` applied where the server lets the client;
    a setting the user ``given`` (``--spark-conf``) that only the server's start can set is
    warned about (lakefeed's own defaults only logged)."""
    check_client()
    check_server(url)
    # deferred: pyspark loads only when this runs
    from pyspark.sql import SparkSession

    # pyspark's own builder (not the Connect class's) also switches pyspark.sql.functions and
    # friends to Connect for this process (SPARK_CONNECT_MODE_ENABLED).
    spark = SparkSession.builder.remote(url).appName(app_name).getOrCreate()
    ignored = [key for key in apply_conf(spark, conf) if key in (given or {})]
    if ignored:
        log.warning(
            "Spark Connect: %s can only be set when the server starts (ignored here)",
            ", ".join(ignored),
        )
    _keep_listener_alive(spark.client)
    return spark


def _keep_listener_alive(client: Any) -> None:
    """Let the StreamingQueryListener's event stream pass observed metrics (this client only).

    pyspark 4.3's ``execute_command_as_iterator`` raises ``UNKNOWN_RESPONSE`` when the server
    sends Python accumulator updates (``__python_accumulator__``, e.g. after a Python data source
    ran) on the listener's long-running command, and the listener bus then drops every client
    listener: lakefeed's event log would stop receiving progress. Those responses carry nothing
    for a command; this skips them instead, exactly as pyspark does for its other commands.
    """

    def execute_command_as_iterator(
        command: Any, observations: dict | None = None
    ) -> Iterator[dict[str, Any]]:
        request = client._execute_plan_request_with_metadata()
        client._set_command_in_plan(request.plan, command)
        for response in client._execute_and_fetch_as_iterator(request, observations or {}):
            if isinstance(response, dict):
                yield response

    client.execute_command_as_iterator = execute_command_as_iterator


def apply_conf(spark: Any, conf: Mapping[str, str]) -> list[str]:
    """Set each session setting; return (and log) those only the server's start can set."""
    fixed = []
    for key, value in conf.items():
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
        elif spark.conf.get(key, None) != value:
            fixed.append(key)
    if fixed:
        log.info("Spark Connect: set at the server's start, not by lakefeed: %s", ", ".join(fixed))
    return fixed


def start_query(start: Callable[[], T], attempts: int = 3) -> T:
    """``start()`` a streaming query, again when the server's ``foreachBatch`` process was late.

    Under Connect a ``foreachBatch`` function runs in a Python process the server starts for the
    query, and Spark waits a fixed 10 s for it to connect back
    (``PythonWorkerFactory.createSimpleWorker``); on a busy server importing pyspark's Connect
    client there can take longer, and ``start()`` fails with :data:`WORKER_LATE` before the query
    exists. Nothing ran, so starting again is safe; any other error is raised at once.
    """
    for attempt in range(1, attempts):
        try:
            return start()
        except Exception as error:
            if WORKER_LATE not in str(error):
                raise
            log.warning("the server's foreachBatch process was late (%d/%d)", attempt, attempts)
    return start()


def session_facts(spark: Any) -> dict[str, str]:
    """Where a run's queries execute and which Delta source reads, for the event log's
    ``run_start`` (``lakefeed status`` and the UI show it). No credentials: host and port only."""
    if is_connect(spark):
        target = {"api": "connect", "server": f"sc://{spark.client._builder.endpoint}"}
    else:
        target = {"api": "classic", "master": str(spark.sparkContext.master)}
    return {**target, "delta_reader": delta_reader(spark)}


def describe(facts: Mapping[str, str]) -> str:
    """``session_facts`` in a few words, e.g. 'Spark Connect sc://h:15002 · Delta reader python'."""
    where = (
        f"Spark Connect {facts.get('server', '?')}"
        if facts.get("api") == "connect"
        else f"master {facts.get('master', '?')}"
    )
    return f"{where} · Delta reader {facts.get('delta_reader', '?')}"


def delta_reader(spark: Any) -> str:
    """Which Delta source runs on ``spark``: the JVM planned one, or the Python reader."""

    return PLANNED_READER if bridge.available(spark) else PYTHON_READER
