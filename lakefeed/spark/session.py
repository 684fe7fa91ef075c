"""The one call that makes a plain SparkSession well configured for a streaming lakehouse.

It sets the state store defaults a streaming lakehouse wants (RocksDB with changelog
checkpointing, UTC session time) and fair scheduling between flows; a ``conf`` given to
:func:`spark_session` wins.

What lives above Spark comes in as :class:`SessionExtension` values the caller passes: the
settings it adds (e.g. the Delta connector's ``spark.sql.python.filterPushdown.enabled``) and
strips (delta-spark's catalog when delta-spark is absent), and what it does once the session
exists (register data sources, install the compatibility surfaces). :func:`lakefeed.spark_session`
(:mod:`lakefeed.session`) passes lakefeed's connectors and, with ``compat=True``,
:mod:`lakefeed.compat.patches`.

When any of ``storage`` (the lakehouse root, table, landing folder or checkpoint locations the
session will use; for a pipeline, :func:`lakefeed.entry.storage_locations`) is an ``s3://`` /
``s3a://`` URI, Hadoop's S3A connector and its settings are added (:mod:`lakefeed.spark.s3a`:
``spark.jars.packages`` hadoop-aws, ``fs.s3.impl``, endpoint and region from the AWS
environment variables); otherwise the session stays jar-free. S3 settings given as
``spark.hadoop.fs.s3a.*`` also serve lakefeed's own S3 clients (:mod:`lakefeed.core.storage`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from lakefeed.core.logs import set_spark_log_level
from lakefeed.core.scoped import bound
from lakefeed.spark import cluster, connect, s3a
from lakefeed.spark.home import compiled_spark_home
from lakefeed.spark.jvm import jar_path

log = logging.getLogger(__name__)

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    # Small machines are the common case; on a cluster it follows the executors' cores
    # (lakefeed.spark.cluster.size_to_cluster).
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Python workers import pyarrow/deltalake on start; on a busy 2-core machine that can take
    # longer than Spark's short connect-back wait, which then fails the task.
    "spark.python.authenticate.socketTimeout": "120s",
    # Micro-batches share one FIFO pool, batch work gets a pool each beside it
    # (lakefeed.runtime.pools; Spark's warning about each pool made on first use is silenced,
    # see _quiet_pool_creation).
    "spark.scheduler.mode": "FAIR",
    # pyspark's daemon, quiet when Spark closed a failed task's socket (lakefeed.spark.daemon)
    "spark.python.daemon.module": "lakefeed.spark.daemon",
}


def _nothing(spark: SparkSession) -> object:
    return None


@dataclass(frozen=True)
class SessionExtension:
    """What a layer above Spark adds to the sessions it asks for (see module docstring)."""

    conf: Mapping[str, str] = field(default_factory=dict)
    """Settings it adds: above :data:`DEFAULT_CONF`, below the caller's own ``conf``."""
    strip: Callable[[Mapping[str, str]], dict[str, str]] = dict
    """The session's settings without those that would break it (e.g. delta-spark's catalog
    when delta-spark is absent); applied to the caller's ``conf`` too."""
    ready: Callable[[SparkSession], object] = _nothing
    """What it does once the session exists (idempotent: a reused session gets it again; what
    it returns is not used)."""


def spark_session(
    app_name: str = "lakefeed",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    storage: Iterable[object] = (),
    remote: str | None = None,
    extensions: Sequence[SessionExtension] = (),
) -> SparkSession:
    """Build (or reuse) a SparkSession with lakefeed's defaults and ``extensions``, in order.

    Safe to call repeatedly: Spark returns the running session and each extension's ``ready``
    is idempotent. ``storage`` lists locations the session will use (S3 ones add S3A, see
    module docstring). ``remote`` (or ``SPARK_REMOTE``, as in pyspark) is a Spark Connect
    server ``sc://HOST:PORT`` to run on instead of a driver in this process (see
    :mod:`lakefeed.spark.connect`).
    """
    url = connect.remote_url(remote, master or (conf or {}).get("spark.master"))
    settings = {**DEFAULT_CONF}
    for extension in extensions:
        settings.update(extension.conf)
    settings.update(conf or {})
    for extension in extensions:
        settings = extension.strip(settings)
    if url is not None:
        return _ready(connect.connect_session(url, app_name, settings, conf), extensions)
    # Executors run our Arrow readers and writers: they must use this interpreter's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is None and "spark.master" not in (conf or {}) and not os.environ.get("MASTER"):
        master = "local[*]"
    if master is not None and master.startswith("local"):
        # A local session has no business on any interface but loopback.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    on_cluster = cluster.is_cluster(master or (conf or {}).get("spark.master"))
    if on_cluster and SparkSession.getActiveSession() is None:
        cluster.prepare_driver(str(master or (conf or {})["spark.master"]))
    if "SPARK_HOME" not in os.environ and SparkSession.getActiveSession() is None:
        # Python workers then import compiled pyspark, not the zip (see lakefeed.spark.home);
        # a user's own SPARK_HOME always wins.
        home = compiled_spark_home()
        if home is not None:
            os.environ["SPARK_HOME"] = home
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings.update(cluster.cluster_conf(master, settings))
    s3a.share_hadoop_settings(settings)
    object_store = s3a.uses_object_store(storage)
    if object_store:
        settings.update(s3a.spark_conf(settings))
    if SparkSession.getActiveSession() is None:
        settings.update(_lakefeed_jar_conf(settings, object_store))
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    _quiet_pool_creation(spark)
    if object_store:
        _ship_resolved_jars(spark, settings)
    if on_cluster:
        cluster.size_to_cluster(spark, conf or {})
        cluster.check_executors(spark)
    return _ready(spark, extensions)


def _ready(spark: SparkSession, extensions: Sequence[SessionExtension]) -> SparkSession:
    """``spark`` once each extension made it ready."""
    for extension in extensions:
        extension.ready(spark)
    return spark


def _quiet_pool_creation(spark: SparkSession) -> None:
    """Silence Spark's WARN "A job was submitted with scheduler pool X, which has not been
    configured": once per pool :mod:`lakefeed.runtime.pools` makes by
    design. A broken allocation file still fails the session's start (Spark raises it, it does
    not warn)."""
    set_spark_log_level(spark, ["org.apache.spark.scheduler.FairSchedulableBuilder"], "ERROR")


def _ship_resolved_jars(spark: SparkSession, settings: Mapping[str, str]) -> None:
    """Executors get the S3A jars Spark resolved from ``spark.jars.packages`` at launch.

    PySpark sets the builder's ``spark.jars`` (lakefeed's jar) after the launcher merged the
    resolved packages into it, so they reach only the driver's class path; added here before
    any task runs, as ``--jars`` would. Later sessions list them in ``spark.jars`` themselves.
    """
    context = spark.sparkContext
    driver_jars = context.getConf().get("spark.repl.local.jars", "") or ""
    listed = context._jsc.sc().listJars().mkString(",")
    shipped = {os.path.basename(jar) for jar in str(listed).split(",")}
    for jar in s3a.remember_resolution(driver_jars, settings):
        if os.path.basename(jar) not in shipped:
            context._jsc.sc().addJar(jar)


def _lakefeed_jar_conf(settings: Mapping[str, str], object_store: bool) -> dict[str, str]:
    """``spark.jars`` plus lakefeed's compiled JVM part (see :mod:`lakefeed.spark.jvm`) and, when
    the session uses S3, its checkpoint file manager
    (:func:`lakefeed.spark.s3a.checkpoint_conf`)."""

    jar = jar_path()
    if jar is None:
        return {}
    conf = {"spark.jars": ",".join(j for j in (settings.get("spark.jars"), jar) if j)}
    return {**conf, **s3a.checkpoint_conf(settings)} if object_store else conf


_EVALUATING: ContextVar[SparkSession | None] = ContextVar("lakefeed_session", default=None)


def evaluating_on(spark: SparkSession) -> AbstractContextManager[SparkSession]:
    """Flow functions evaluated inside this block get ``spark`` from :func:`active_spark`."""
    return bound(_EVALUATING, spark)


def evaluating_session() -> SparkSession | None:
    """The session bound by :func:`evaluating_on`, if any (the runner's, or the loader's)."""
    return _EVALUATING.get()


def active_spark(*extensions: SessionExtension) -> SparkSession:
    """The session a pipeline function should use: the runner's while it evaluates flows, else
    the running one, else a fresh default with ``extensions``.

    pyspark's "active session" is one process-wide slot that any ``createDataFrame`` moves,
    e.g. to a streaming query's cloned session inside ``foreachBatch``: temp views and
    settings of the runner's session are not there, hence the runner's own comes first.
    """
    running = _EVALUATING.get() or SparkSession.getActiveSession()
    return running or spark_session(extensions=extensions)


@contextmanager
def conf_restored(spark: SparkSession) -> Iterator[SparkSession]:
    """The session's runtime confs, when the block ends, as they were when it began: what a
    pipeline sets on it (its configuration, its state store settings, a ``spark.conf.set`` in
    its code) belongs to that run, as DLT's per-pipeline configuration does, and never reaches
    the next user of a shared session."""
    before = spark.conf.getAll
    try:
        yield spark
    finally:
        try:
            _restore(spark, before)
        except Exception as error:  # a session stopped under the run: nothing left to restore
            log.warning("Spark confs not restored after the run: %s", error)


def _restore(spark: SparkSession, before: Mapping[str, str]) -> None:
    after = spark.conf.getAll
    for key in sorted(after.keys() - before.keys()):
        spark.conf.unset(key)
    for key, value in before.items():
        if after.get(key) != value:
            spark.conf.set(key, value)
