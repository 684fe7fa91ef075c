"""Shared fixtures: one SparkSession for the whole test session (JVM start costs seconds)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Python workers must import pyarrow, deltalake, ...: run them with this interpreter.
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

# Every JVM the tests start (this session, killed drivers, cluster workers) keeps its scratch
# under one directory removed at the end: a driver killed with -9 never runs Spark's clean-up,
# and each S3 driver copies the 650 MB AWS SDK bundle into its scratch, so /tmp filled up.
_SPARK_SCRATCH = tempfile.mkdtemp(prefix="lakefeed-tests-spark-")
os.environ["SPARK_LOCAL_DIRS"] = _SPARK_SCRATCH


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_SPARK_SCRATCH, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use the ``spark``, ``postgres``, ``broker`` or ``moto`` fixture are marked so
    without saying so."""
    _mark_by_fixtures(items)
    _mark_slow_and_hold_back_soaks(config, items)


def _mark_by_fixtures(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
        if "postgres" in fixtures:
            item.add_marker(pytest.mark.postgres)
        if "broker" in fixtures or "apache_kafka" in fixtures:
            item.add_marker(pytest.mark.kafka)
        if "apache_kafka" in fixtures:
            item.add_marker(pytest.mark.apache_kafka)
        if "moto" in fixtures:
            item.add_marker(pytest.mark.s3)


# What a test starts that makes it slow: a JVM, a server, a browser, a killed-and-restarted driver,
# a wheel build. Each of these markers implies ``slow``; ``./dev quick`` runs ``-m "not slow"``.
SLOW_MARKERS = frozenset(
    {"spark", "kafka", "apache_kafka", "postgres", "browser", "crash", "cluster", "s3",
     "connect", "faults", "wheel", "soak"}
)  # fmt: skip


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all", action="store_true", help="run the soak variants too (marked soak; CI skips them)"
    )


def _mark_slow_and_hold_back_soaks(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` from what a test starts, so no list of markers is kept by hand; leave out
    the ``soak`` variants (a second crash point, a benchmark's smoke run, the fault soak's extra
    cases) unless ``--all`` is given or ``-m`` names them: CI proves each kind once."""
    held_back = []
    keep_soaks = config.getoption("--all") or "soak" in (config.option.markexpr or "")
    for item in items:
        if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)
        if not keep_soaks and item.get_closest_marker("soak"):
            held_back.append(item)
    if held_back:
        config.hook.pytest_deselected(items=held_back)
        dropped = set(held_back)
        items[:] = [item for item in items if item not in dropped]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """The runtime runs on a session without the compatibility surfaces (issue 30); tests of the
    surfaces opt in with ``@pytest.mark.compat`` (see :func:`compat_surfaces`)."""
    from lakefeed.session import spark_session

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = spark_session(
        app_name="lakefeed-tests",
        master="local[2]",
        compat=False,
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.ui.enabled": "false",
            "spark.sql.warehouse.dir": str(warehouse),
            "spark.driver.memory": "2g",
            "spark.sql.streaming.minBatchesToRetain": "20",
        },
    )
    global _SESSION
    _SESSION = session
    yield session
    _SESSION = None
    session.stop()


_SESSION: SparkSession | None = None  # the shared session, once the ``spark`` fixture started it


@pytest.fixture(autouse=True)
def session_as_found() -> Iterator[None]:
    """Each test leaves the shared session as it found it, so no test slows or changes the
    ones after it: a streaming query left running takes a core from every later test; a
    pipeline spec's ``configuration`` (e.g. 1000 shuffle partitions) stays in the session's
    confs and in ``lf.config`` (which later runs without ``conf=`` apply again). Module
    fixtures have run before this fixture, so what they set holds for their module."""
    session = _SESSION
    queries = {query.id for query in session.streams.active} if session else set()
    confs = session.conf.getAll if session else {}
    pipeline_conf = _pipeline_conf()
    yield
    _restore_pipeline_conf(pipeline_conf)
    if session is None or _SESSION is None:
        return
    for query in session.streams.active:
        if query.id not in queries:
            query.stop()
    now = session.conf.getAll
    for key in now.keys() - confs.keys():
        session.conf.unset(key)
    for key, value in confs.items():
        if now.get(key) != value:
            session.conf.set(key, value)


def _pipeline_conf() -> dict[str, str] | None:
    """``lf.config``'s values (None before anything imported it: it then holds none)."""
    api = sys.modules.get("lakefeed.pipeline.api")  # imports pyspark: not imported for this
    return None if api is None else {key: api.config(key) for key in api.config_keys()}


def _restore_pipeline_conf(before: dict[str, str] | None) -> None:
    api = sys.modules.get("lakefeed.pipeline.api")
    if api is not None:
        api.set_config(before or {})


def _install_surfaces() -> None:
    """Every connector's format routed (the shared session has no delta-spark); no session
    needed: the ``spark`` fixture registered the connectors."""
    from lakefeed.compat import patches
    from lakefeed.connectors import registry

    patches.install(registry.connectors())


def _uninstall_surfaces() -> None:
    if "lakefeed.compat.patches" in sys.modules:  # else nothing installed them
        sys.modules["lakefeed.compat.patches"].uninstall()


@pytest.fixture(scope="module", autouse=True)
def compat_module(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module marked ``compat`` (``pytestmark``) has the surfaces from its first fixture on,
    so its module fixtures' pipelines run with them too."""
    marked = request.node.get_closest_marker("compat") is not None
    if marked:
        _install_surfaces()
    yield
    if marked:
        _uninstall_surfaces()


@pytest.fixture(autouse=True)
def compat_surfaces(request: pytest.FixtureRequest) -> Iterator[None]:
    """``@pytest.mark.compat`` tests (pyspark's ``format("delta")``/``format("cloudFiles")``,
    ``DeltaTable``, Delta SQL, dlt/SDP) get :mod:`lakefeed.compat.patches` for the test;
    after every other test they are gone, also when the test's own ``lakefeed.run`` or
    ``lakefeed.spark_session()`` installed them."""
    if request.node.get_closest_marker("compat") is not None:
        _install_surfaces()
    yield
    module = request.node.getparent(pytest.Module)
    if module is None or module.get_closest_marker("compat") is None:
        _uninstall_surfaces()


@pytest.fixture
def lakehouse(tmp_path: Path):
    from lakefeed.core.lakehouse import Lakehouse

    return Lakehouse.at(tmp_path / "lakehouse")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def postgres() -> Iterator:
    """One PostgreSQL server per test session (``postgres.create_database()`` per test)."""
    from tests.support.postgres import Postgres

    server = Postgres().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """One tansu broker per test session on a free 127.0.0.1 port, stopped by PID."""
    from tests.connectors.kafka.broker import Tansu

    server = Tansu(tmp_path_factory.mktemp("tansu") / "tansu.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def apache_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """Apache Kafka itself (one KRaft node, jars fetched once by Maven) on 127.0.0.1, started
    on first use and stopped at the end of the session."""
    from tests.support.apache_kafka import ApacheKafka

    server = ApacheKafka(tmp_path_factory.mktemp("apache-kafka")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest):  # noqa: ANN201
    """The Kafka broker of a test: tansu (shared by Kafka and cluster tests), or each of tansu
    and Apache Kafka for tests marked ``@on_both_brokers`` (``tests.connectors.kafka.broker``).
    Each test creates its own topic (``broker.create_topic()``), so tests never see each other's
    messages."""
    return request.getfixturevalue(getattr(request, "param", "tansu"))


@pytest.fixture(scope="session")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """One moto S3-API server per test session on 127.0.0.1 (S3 and cluster tests share it);
    each test makes its own bucket (``moto.bucket()``)."""
    from tests.support.s3 import MotoServer

    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log").start()
    yield server
    server.stop()


@pytest.fixture
def s3_env(moto, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The AWS variables of the test server, set in this process (delta-rs, pyarrow read them)."""
    env = moto.env()
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env
