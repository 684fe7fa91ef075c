"""lakefeed's small JVM part: a Spark stream source whose batches Python plans, and a batch
relation Python plans whenever a query reading it is planned.

Python data sources hand every row from a Python worker to the JVM, which caps a Python
streaming source at about a third of Spark's own file sources. ``PlannedSource`` (Java, under
``java/``) lets a lakefeed source keep its offsets and planning in Python, called back over
Py4J on the driver, while each batch is a DataFrame of Spark's own readers: rows never leave
the JVM. ``PlannedRelation`` does the same for a batch read that must not fix its files when
the DataFrame is made (a Delta table on the static side of a stream–static join), and
``PruneUnusedFileMetadata``, an optimizer rule that keeps Spark's file metadata out of a planned
stream's scan when the query does not use it. The jar is
compiled on first use with the local ``javac`` against pyspark's jars and cached; without a JDK
lakefeed keeps using its pure-Python sources.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from lakefeed.spark.home import cache_root, pip_spark_home

log = logging.getLogger(__name__)

SOURCES = Path(__file__).parent / "java"
PROVIDER = "dev.lakefeed.spark.PlannedSourceProvider"


def loadable(spark: Any, class_name: str) -> bool:
    """Whether the driver JVM behind ``spark`` can load ``class_name`` (False with no gateway)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(class_name, False, loader)
    except Exception:
        return False
    return True


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def _fingerprint(spark_jars: str) -> str:
    digest = hashlib.sha256()
    for source in sorted(SOURCES.rglob("*.java")):
        digest.update(source.relative_to(SOURCES).as_posix().encode())
        digest.update(source.read_bytes())
    digest.update(",".join(sorted(os.listdir(spark_jars))).encode())
    return digest.hexdigest()[:16]


def jar_path() -> str | None:
    """The compiled jar (built now if missing); None without pip's Spark jars or a JDK."""
    home = pip_spark_home()
    if home is None:
        return None
    spark_jars = os.path.join(home, "jars")
    jar = os.path.join(cache_root(), "jvm", f"lakefeed-spark-{_fingerprint(spark_jars)}.jar")
    if os.path.isfile(jar):
        return jar
    javac = _javac()
    if javac is None:
        log.info("no javac: lakefeed's sources read rows through Python workers")
        return None
    try:
        _build(javac, spark_jars, jar)
    except (OSError, subprocess.CalledProcessError) as exc:
        log.warning("could not compile lakefeed's JVM source (%s): using Python sources", exc)
        return None
    return jar


def _build(javac: str, spark_jars: str, jar: str) -> None:
    os.makedirs(os.path.dirname(jar), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(jar)) as work:
        classes = os.path.join(work, "classes")
        sources = [str(s) for s in sorted(SOURCES.rglob("*.java"))]
        subprocess.run(
            [javac, "-nowarn", "-d", classes, "-cp", os.path.join(spark_jars, "*"), *sources],
            check=True,
            capture_output=True,
            text=True,
        )
        built = os.path.join(work, "lakefeed-spark.jar")
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(Path(classes).rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        os.replace(built, jar)  # atomic: concurrent sessions see a whole jar or none
