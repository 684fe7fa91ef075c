"""lakefeed as a user gets it: a wheel built from this tree, installed into a fresh venv, run
from a folder outside the repository (no clone to lean on; ``lakefeed demo`` ships its pipeline).

Dependencies are installed at the versions of the environment running the tests (as
constraints), so uv takes them from its cache instead of the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parents[3]
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")

pytestmark = [pytest.mark.wheel, pytest.mark.timeout(1200)]


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.exists() else shutil.which("uv")
    assert found, "uv is needed to build and install the wheel (./dev setup installs it)"
    return found


def _run(command: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, check=False, **kwargs
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh venv holding lakefeed from a freshly built wheel."""
    work = tmp_path_factory.mktemp("wheel")
    uv = _uv()
    # Build from a copy of what a build reads (setuptools writes build/ and *.egg-info beside
    # the sources); sdist first, then the wheel from the sdist: both must carry the package data.
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for name in ("lakefeed", "delta", "examples"):  # lakefeed/examples: a link to examples/
        shutil.copytree(ROOT / name, source / name, symlinks=True, ignore=IGNORED)
    _run([uv, "build", "--out-dir", work / "dist", source])
    (wheel,) = (work / "dist").glob("lakefeed-*.whl")
    frozen = _run([uv, "pip", "freeze", "--python", sys.executable]).stdout.splitlines()
    constraints = work / "constraints.txt"
    pinned = [line for line in frozen if "==" in line and not line.startswith("lakefeed==")]
    constraints.write_text("\n".join(pinned) + "\n")
    _run([uv, "venv", "--python", sys.executable, work / "venv"])
    python = work / "venv" / "bin" / "python"
    _run([uv, "pip", "install", "--python", python, "-c", constraints, wheel])
    return python.parent


def _env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PYSPARK_PYTHON": str(bin_dir / "python"), "PYSPARK_DRIVER_PYTHON": ""}


def test_the_installed_package_is_the_wheel_not_this_tree(installed: Path, tmp_path: Path):
    where = _run(
        [installed / "python", "-c", "import lakefeed; print(lakefeed.__file__)"],
        cwd=tmp_path,
        env=_env(installed),
    ).stdout.strip()
    assert Path(where).is_relative_to(installed.parent) and not Path(where).is_relative_to(ROOT)
    assert (Path(where).parent / "examples" / "iot" / "pipeline.py").is_file()
    help_text = _run([installed / "lakefeed", "demo", "--help"], cwd=tmp_path, env=_env(installed))
    assert "--duration" in help_text.stdout


@pytest.mark.soak  # the wheel's examples and ``lakefeed demo`` are checked above; this runs it
def test_demo_runs_from_a_folder_outside_the_repository(installed: Path, tmp_path: Path):
    command = [installed / "lakefeed", "demo", "--duration", "25", "--rows-per-second", "50"]
    command += ["--master", "local[2]", "--lakehouse", tmp_path / "lakehouse"]
    done = _run(command, cwd=tmp_path, env=_env(installed), timeout=900)
    assert "not found" not in done.stderr
    bronze = DeltaTable(str(tmp_path / "lakehouse" / "tables" / "bronze_readings"))
    assert bronze.to_pyarrow_table().num_rows > 0
    assert "bronze_readings:" in done.stdout


# delta-spark's quick start in the forms docs.delta.io documents (Quick Start, Python): its
# session setup (extension and catalog settings, configure_spark_with_delta_pip), the star
# imports, and DeltaTable's update, delete and merge builder; written for this test with its own
# table and numbers, on the installed wheel's ``delta`` package.
QUICK_START = """
import pyspark
from delta import *

builder = (
    pyspark.sql.SparkSession.builder.appName("wheel-quick-start")
    .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
)
spark = configure_spark_with_delta_pip(builder).getOrCreate()

SEATS = "/tmp/seat-counts"
spark.range(10, 14).write.format("delta").save(SEATS)
spark.read.format("delta").load(SEATS).show()
spark.range(20, 26).write.format("delta").mode("overwrite").save(SEATS)

from delta.tables import *
from pyspark.sql.functions import *

seats = DeltaTable.forPath(spark, SEATS)
seats.update(condition=expr("id % 3 == 0"), set={"id": expr("id * 10")})
seats.delete(condition=expr("id > 100"))
arrivals = spark.range(18, 30, 2)
(
    seats.alias("seats")
    .merge(arrivals.alias("arrivals"), "seats.id = arrivals.id")
    .whenMatchedUpdate(set={"id": col("arrivals.id")})
    .whenNotMatchedInsert(values={"id": col("arrivals.id")})
    .execute()
)
seats.toDF().show()
first = spark.read.format("delta").option("versionAsOf", 0).load(SEATS)
first.show()

from delta.exceptions import ConcurrentAppendException
print("NOW", sorted(r.id for r in seats.toDF().collect()))
print("V0", sorted(r.id for r in first.collect()))
"""
# What the script leaves: 20..25 with the multiples of three scaled past 100 and deleted, then
# the even arrivals 18..28 merged in; version 0 is the first write.
AFTER = sorted({*(i for i in range(20, 26) if i % 3), *range(18, 30, 2)})


def test_delta_spark_quick_start_forms_run_on_the_wheel(installed: Path, tmp_path: Path):
    script = tmp_path / "quick_start.py"
    script.write_text(QUICK_START.replace("/tmp/seat-counts", str(tmp_path / "seat-counts")))
    done = _run([installed / "python", script], cwd=tmp_path, env=_env(installed), timeout=600)
    assert f"NOW {AFTER}" in done.stdout, done.stdout[-2000:]
    assert f"V0 {list(range(10, 14))}" in done.stdout
    assert "ClassNotFoundException" not in done.stderr, done.stderr[-2000:]
