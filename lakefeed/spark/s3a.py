"""Spark's side of object storage: Hadoop's S3A connector, added only when an S3 path is used.

Spark writes checkpoints (and reads or writes Parquet batches) through Hadoop file systems; the
pyspark wheel has Hadoop's client (3.5.0) but not its S3A connector. When a session will use an
``s3://`` / ``s3a://`` location, :func:`spark_conf` adds ``org.apache.hadoop:hadoop-aws`` of the
bundled Hadoop version (it brings the AWS SDK bundle) through Spark's own ``spark.jars.packages``,
resolved from Maven Central into an Ivy cache under lakefeed's cache folder
(``~/.cache/lakefeed/ivy``, about 700 MB once). Spark's launcher also adds resolved packages to a
Python app's ``spark.files`` / ``--py-files`` (for jars that carry Python code): every session would
copy the 656 MB AWS SDK bundle into its temporary folder, and every executor fetch it twice. So
lakefeed notes the jars Spark resolved (:func:`remember_resolution`) and later sessions pass them as
plain ``spark.jars`` from the cache. Sessions without S3 paths stay jar-free.

``s3://`` is mapped to S3A (``spark.hadoop.fs.s3.impl``), so one URI serves Spark, delta-rs and
pyarrow. The endpoint and region come from ``AWS_ENDPOINT_URL`` / ``AWS_REGION`` (a custom
endpoint turns on path-style access, as S3-compatible servers need). Credentials are *not*
copied into Spark's configuration: S3A's default provider chain reads ``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY`` from the environment itself, so no secret sits in the Spark UI's
environment page or in lakefeed's output. Settings the user gives (``--spark-conf
spark.hadoop.fs.s3a...``) always win.
"""

from __future__ import annotations

import glob
import os
import socket
from collections.abc import Iterable, Mapping
from urllib.parse import urlparse

from lakefeed.core.errors import ConfigError
from lakefeed.core.storage import S3Settings, is_object_store, register
from lakefeed.spark.errors import JARS_UNAVAILABLE
from lakefeed.spark.home import cache_root, pip_spark_home

S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"
MAVEN_CENTRAL = ("repo1.maven.org", 443)
DEFAULT_HADOOP = "3.5.0"


def hadoop_version() -> str:
    """The Hadoop client version pyspark bundles (hadoop-aws must match it exactly)."""
    home = pip_spark_home()
    found = glob.glob(os.path.join(home, "jars", "hadoop-client-api-*.jar")) if home else []
    if not found:
        return DEFAULT_HADOOP
    return os.path.basename(found[0]).removeprefix("hadoop-client-api-").removesuffix(".jar")


def package() -> str:
    return f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"


def uses_object_store(locations: Iterable[object]) -> bool:
    return any(is_object_store(str(location)) for location in locations)


def spark_conf(given: Mapping[str, str]) -> dict[str, str]:
    """Settings that let a session read and write ``s3://`` / ``s3a://`` through S3A."""
    ivy = given.get("spark.jars.ivy") or os.path.join(cache_root(), "ivy")
    packages = [p for p in (given.get("spark.jars.packages") or "").split(",") if p]
    listed = [*packages, *(given.get("spark.jars") or "").split(",")]
    conf = {"spark.hadoop.fs.s3.impl": S3A, "spark.hadoop.fs.s3a.impl": S3A}
    if not any("hadoop-aws" in jar for jar in listed):  # the user's own jars win
        conf.update(_hadoop_aws(given, packages, ivy))
    settings = S3Settings.from_env()
    if settings.endpoint:
        url = urlparse(settings.endpoint)
        conf["spark.hadoop.fs.s3a.endpoint"] = settings.endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(url.scheme == "https").lower()
    if settings.region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = settings.region
    merged = ("spark.jars.packages", "spark.jars")
    return {k: v for k, v in conf.items() if k not in given or k in merged}


def _hadoop_aws(given: Mapping[str, str], packages: list[str], ivy: str) -> dict[str, str]:
    resolved = resolved_jars(ivy)
    if resolved:  # Spark resolved them in an earlier session
        return {"spark.jars": ",".join(j for j in (given.get("spark.jars"), *resolved) if j)}
    check_resolvable(ivy)
    return {"spark.jars.packages": ",".join([*packages, package()]), "spark.jars.ivy": ivy}


def _resolution_file(ivy: str) -> str:
    return os.path.join(ivy, f"lakefeed-{package().replace(':', '_')}.jars")


def resolved_jars(ivy: str) -> list[str]:
    """The jars Spark resolved for :func:`package` in an earlier session, if all are cached."""
    try:
        with open(_resolution_file(ivy), encoding="utf-8") as noted:
            jars = noted.read().split()
    except OSError:
        return []
    return jars if jars and all(os.path.isfile(jar) for jar in jars) else []


def remember_resolution(driver_jars: str, given: Mapping[str, str]) -> list[str]:
    """The jars of ``package()`` Spark resolved for a started session (``driver_jars``: the
    driver's class path, ``spark.repl.local.jars``), noted for later sessions when Spark
    resolved it alone (a user's own packages in the same resolution are not ours to keep)."""
    if given.get("spark.jars.packages") != package():
        return []
    folder = os.path.join(given["spark.jars.ivy"], "jars") + os.sep
    paths = (urlparse(j).path if j.startswith("file:") else j for j in driver_jars.split(","))
    jars = [path for path in paths if path.startswith(folder)]
    if not any("hadoop-aws" in jar for jar in jars):
        return []
    target = _resolution_file(given["spark.jars.ivy"])
    staging = f"{target}.{os.getpid()}"
    with open(staging, "w", encoding="utf-8") as out:
        out.write("\n".join(jars) + "\n")
    os.replace(staging, target)
    return jars


HADOOP_S3A = "spark.hadoop.fs.s3a."


def share_hadoop_settings(given: Mapping[str, str]) -> None:
    """S3A settings given as Spark conf serve lakefeed's own S3 clients too (delta-rs, pyarrow:
    Delta commits, cloudFiles' file log, the event log).

    Registered as the session's settings in :mod:`lakefeed.core.storage` (per-bucket ones included;
    the Delta connector's readers and writers carry them to executors), and the plain ones set
    as the standard AWS variables in this process's environment before the JVM starts, so its
    Python workers and every delta-rs call inherit them; explicit settings win over the
    environment, as in S3A's own provider chain. Nothing is logged.
    """
    hadoop = {
        k.removeprefix("spark.hadoop."): v for k, v in given.items() if k.startswith(HADOOP_S3A)
    }
    register(None, hadoop)
    shared = S3Settings.from_hadoop(hadoop).storage_options()
    if "AWS_ENDPOINT_URL" in shared:
        shared["AWS_ENDPOINT_URL_S3"] = shared["AWS_ENDPOINT_URL"]  # the one SDKs read first
    os.environ.update(shared)


CHECKPOINT_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
CHECKPOINT_MANAGER = "dev.lakefeed.spark.ObjectStoreCheckpointFileManager"
"""In lakefeed's jar: checkpoint files on S3 written in place instead of renamed (a copy)."""


def checkpoint_conf(given: Mapping[str, str]) -> dict[str, str]:
    """Spark's checkpoint files on S3 without a rename, unless the user chose a manager; the
    caller adds lakefeed's jar (local paths keep Spark's own writes, see the Java class)."""
    return {} if CHECKPOINT_MANAGER_CONF in given else {CHECKPOINT_MANAGER_CONF: CHECKPOINT_MANAGER}


def cached(ivy: str) -> bool:
    """Whether the hadoop-aws jar is already in the Ivy cache (then no network is needed)."""
    name = f"org.apache.hadoop_hadoop-aws-{hadoop_version()}.jar"
    return os.path.isfile(os.path.join(ivy, "jars", name))


def check_resolvable(ivy: str, timeout: float = 3.0) -> None:
    """Offline and not cached: refuse before the JVM starts, naming the jars to provide.

    Without this, Spark's launcher fails inside ``getOrCreate`` with an Ivy resolution dump and
    "Java gateway process exited".
    """
    if cached(ivy):
        return
    try:
        with socket.create_connection(MAVEN_CENTRAL, timeout):
            return
    except OSError:
        pass
    raise ConfigError(
        f"an s3:// or s3a:// location needs Hadoop's S3A connector ({package()} and the AWS SDK "
        "bundle it depends on), which is not cached and Maven Central is unreachable",
        fix=f"run once with network access (the jars are cached in {ivy}), or download "
        f"{package()} and software.amazon.awssdk:bundle yourself and pass them with "
        "--spark-conf spark.jars=/path/hadoop-aws.jar,/path/bundle.jar",
        code=JARS_UNAVAILABLE,
    )
