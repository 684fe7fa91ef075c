"""With delta-spark on the classpath, its connector serves ``delta`` and lakefeed steps aside.

delta-spark cannot be downloaded here (no Maven), so a jar holding a class of the name
lakefeed looks for (delta-spark's session extension) stands in for it: what is tested is
lakefeed's detection and that it then registers and patches nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakefeed.connectors.delta import NATIVE_EXTENSION, native_delta_available

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK's javac"),
]

PROBE = """
import json, sys
from pyspark.sql.streaming.readwriter import DataStreamWriter
from lakefeed.connectors.delta import native_delta_available
from lakefeed.session import spark_session
spark = spark_session("native", master="local[1]", conf={"spark.jars": sys.argv[1],
                      "spark.ui.enabled": "false"})
print(json.dumps({"native": native_delta_available(spark),
                  "patched": hasattr(DataStreamWriter.start, "_lakefeed_wrapped")}))
spark.stop()
"""


def _stand_in_jar(folder: Path) -> Path:
    package, name = NATIVE_EXTENSION.rsplit(".", 1)
    source = folder / f"{name}.java"
    source.write_text(f"package {package};\npublic class {name} {{}}\n")
    subprocess.run(["javac", "-d", str(folder / "classes"), str(source)], check=True)
    jar = folder / "delta-stand-in.jar"
    entry = NATIVE_EXTENSION.replace(".", "/") + ".class"
    with zipfile.ZipFile(jar, "w") as archive:
        archive.write(folder / "classes" / entry, entry)
    return jar


@pytest.mark.compat  # the format("delta") surface lakefeed installs when delta-spark is absent
def test_lakefeed_serves_delta_without_the_jar(spark) -> None:
    assert not native_delta_available(spark)
    assert hasattr(DataStreamWriter.start, "_lakefeed_wrapped")


def test_native_connector_detected_and_left_alone(tmp_path: Path) -> None:
    jar = _stand_in_jar(tmp_path)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(jar)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"native": True, "patched": False}
