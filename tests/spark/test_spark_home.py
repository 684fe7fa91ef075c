from __future__ import annotations

import os
import subprocess
import sys

from lakefeed.spark.home import compiled_spark_home, pip_spark_home


def test_mirror_links_everything_but_the_worker_zip(tmp_path):
    home = pip_spark_home()
    assert home is not None, "tests run on pip's pyspark"
    mirror = compiled_spark_home(str(tmp_path))
    assert mirror is not None
    assert os.path.realpath(os.path.join(mirror, "jars")) == os.path.join(home, "jars")
    assert os.path.isfile(os.path.join(mirror, "bin", "spark-submit"))
    libs = os.listdir(os.path.join(mirror, "python", "lib"))
    assert "pyspark.zip" not in libs
    assert any(name.startswith("py4j") for name in libs)
    # Built once, then reused; no staging folders left behind.
    assert compiled_spark_home(str(tmp_path)) == mirror
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


def test_worker_path_without_the_zip_imports_compiled_pyspark(tmp_path):
    """What a Python worker sees: Spark puts SPARK_HOME's zips first on PYTHONPATH."""
    mirror = compiled_spark_home(str(tmp_path))
    assert mirror is not None
    lib = os.path.join(mirror, "python", "lib")
    path = os.pathsep.join(os.path.join(lib, name) for name in ("pyspark.zip", *os.listdir(lib)))
    found = subprocess.run(
        [sys.executable, "-c", "import pyspark.daemon; print(pyspark.daemon.__file__)"],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert ".zip" not in found and found.strip().endswith(".py")


def test_package_import_loads_no_connector_or_pipeline_module():
    """Workers import ``lakefeed`` on every process start: it must stay light."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, lakefeed; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    heavy = [m for m in loaded if m.startswith(("lakefeed.", "pyspark", "deltalake"))]
    assert heavy == ["lakefeed.moved"]  # the old-path finder: the standard library only
    import lakefeed

    assert callable(lakefeed.table) and callable(lakefeed.read_kafka)
