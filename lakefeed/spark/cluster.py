"""Running on a Spark cluster: lakefeed onto the executors, checked before any query starts.

On ``local[*]`` the executors are threads of the driver's JVM and their Python workers import the
driver's environment. On a cluster (``spark://``, ``yarn``, ``k8s://``) they are separate JVMs,
possibly on other machines, so lakefeed ships itself through Spark's own mechanisms:

- the ``lakefeed`` package as a zip in ``spark.submit.pyFiles`` (Spark puts it first on every
  Python worker's path, so executors run the driver's lakefeed, not whatever is installed there);
- the compiled planned-source jar in ``spark.jars`` (see :mod:`lakefeed.spark.session`).

What cannot be shipped (Python, pyarrow, deltalake, confluent-kafka) must be installed on the
workers; :func:`check_executors` runs one tiny job that imports them there and fails with one
clear error naming what is missing. Sizing follows the cluster: shuffle partitions default to
``defaultParallelism`` (the executors' total cores) once connected, unless the user set them.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import socket
import sys
import threading
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from lakefeed.core.errors import ConfigError
from lakefeed.spark.errors import BAD_SPARK_CONF, EXECUTORS_LACK
from lakefeed.spark.errors import CLUSTER_UNREACHABLE as UNREACHABLE
from lakefeed.spark.home import cache_root

PACKAGE = Path(__file__).resolve().parents[1]  # the lakefeed package, shipped whole
# What every executor's Python must import; lakefeed itself is shipped.
EXECUTOR_MODULES = ("pyarrow", "deltalake", "lakefeed")


def is_cluster(master: str | None) -> bool:
    """Whether ``master`` runs executors outside the driver's JVM (not ``local``)."""
    return bool(master) and not str(master).startswith("local")


def parse_spark_conf(items: Sequence[str]) -> dict[str, str]:
    """``key=value`` Spark settings (``--spark-conf``); keys must be Spark's (``spark.``)."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.startswith("spark."):
            raise ConfigError(
                f"--spark-conf {item!r} is not a Spark setting",
                fix="write --spark-conf spark.key=value (pipeline settings go in --conf)",
                code=BAD_SPARK_CONF,
            )
        conf[key] = value.strip()
    return conf


def prepare_driver(master: str) -> None:
    """Before the driver starts: the master must answer; a loopback master keeps it on loopback."""
    check_master(master)
    if urlparse(master.split(",")[0]).hostname in ("127.0.0.1", "localhost"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def check_master(master: str, timeout: float = 5.0) -> None:
    """Fail clearly when a standalone master does not answer (Spark itself would retry forever)."""
    url = urlparse(master)
    if url.scheme != "spark" or not url.hostname:
        return
    for host_port in master.removeprefix("spark://").split(","):  # HA: any master will do
        host, _, port = host_port.partition(":")
        try:
            with socket.create_connection((host, int(port or 7077)), timeout):
                return
        except (OSError, ValueError):
            continue
    raise ConfigError(
        f"no Spark master answers at {master}",
        fix="start the master (spark-class org.apache.spark.deploy.master.Master) or fix --master",
        code=UNREACHABLE,
    )


def package_zip() -> str:
    """The ``lakefeed`` package as a zip for ``spark.submit.pyFiles`` (cached by content)."""
    files = sorted(p for p in PACKAGE.rglob("*") if p.is_file() and _shippable(p))
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    target = Path(cache_root()) / "pyfiles" / f"lakefeed-{digest.hexdigest()[:16]}.zip"
    if target.is_file():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, (Path("lakefeed") / path.relative_to(PACKAGE)).as_posix())
    os.replace(staging, target)  # atomic: concurrent drivers see a whole zip or none
    return str(target)


def _shippable(path: Path) -> bool:
    return "__pycache__" not in path.parts and path.suffix in (".py", ".sql", ".typed", ".json")


def cluster_conf(master: str | None, conf: Mapping[str, str]) -> dict[str, str]:
    """Settings a cluster session needs on top of ``conf``: lakefeed's zip in the pyFiles."""
    if not is_cluster(master or conf.get("spark.master")):
        return {}
    files = [f for f in (conf.get("spark.submit.pyFiles"), package_zip()) if f]
    return {"spark.submit.pyFiles": ",".join(files)}


def _probe(_: object) -> list[tuple[str, str]]:
    """On an executor: each module's version, or the error importing it."""

    found = [("python", sys.version.split()[0])]
    for name in EXECUTOR_MODULES:
        try:
            module = importlib.import_module(name)
            found.append((name, str(getattr(module, "__version__", "?"))))
        except Exception as exc:  # an executor's Python may lack anything
            found.append((name, f"MISSING: {type(exc).__name__}: {exc}"))
    return found


def check_executors(spark: SparkSession, timeout: float = 180.0) -> None:
    """Run one task per executor core importing what lakefeed needs there; fail clearly if not.

    A job no executor takes (workers without free cores or memory) is cancelled after
    ``timeout`` seconds instead of waiting forever.
    """
    context = spark.sparkContext
    slots = context.defaultParallelism
    context.setJobGroup("lakefeed-check-executors", "lakefeed: check executors")
    timer = threading.Timer(timeout, context.cancelJobGroup, ["lakefeed-check-executors"])
    timer.start()
    try:
        found = dict(context.parallelize(range(slots), slots).flatMap(_probe).collect())
    except Exception as exc:
        raise ConfigError(
            f"the executors of {context.master} did not run lakefeed's check in {timeout:.0f} s "
            f"or failed it: {str(exc).splitlines()[0]}",
            fix="give the application cores and memory on the workers, and install the driver's "
            "Python (same minor version) with pyarrow and deltalake there (PYSPARK_PYTHON)",
            code=EXECUTORS_LACK,
        ) from None
    finally:
        timer.cancel()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    missing = {name: state for name, state in found.items() if state.startswith("MISSING")}
    if missing:
        raise ConfigError(
            f"executors of {context.master} lack {', '.join(sorted(missing))}: {missing}",
            fix="pip install lakefeed's dependencies (pyarrow, deltalake, confluent-kafka) into "
            "the workers' Python, the one PYSPARK_PYTHON names",
            code=EXECUTORS_LACK,
        )


def size_to_cluster(spark: SparkSession, given: Mapping[str, str]) -> None:
    """Shuffle partitions follow the executors' cores unless the user set them."""
    if "spark.sql.shuffle.partitions" not in given:
        cores = spark.sparkContext.defaultParallelism
        spark.conf.set("spark.sql.shuffle.partitions", str(max(cores, 1)))
