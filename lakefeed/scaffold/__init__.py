"""``lakefeed init NAME``: a new project that runs and is tested from the first minute.

Like ``spark-pipelines init``, ``dbt init`` and ``dlt init``: a pipeline folder (a Python flow
on lakefeed's IoT generator and a SQL flow reading it), pytest tests that run the pipeline on
a temporary lakehouse and check its tables (one feeding its own rows with
:mod:`lakefeed.testing`), and a README with the commands. The files are
templates here (not package data) so they ship in every install and are checked by the tests
that run a generated project.
"""

from __future__ import annotations

import keyword
from pathlib import Path

from lakefeed.core.errors import ConfigError

PIPELINE_PY = '''"""{name}: device readings from lakefeed's IoT generator, parsed and checked.

Replace ``lf.source("iot", ...)`` with your source: ``lf.read_files(path, format="json")``,
``lf.read_kafka(...)`` or ``lf.source("delta", path)``.
"""

from pyspark.sql import functions as F

import lakefeed as lf

PAYLOAD = "event_id STRING, device_id STRING, event_time TIMESTAMP, temperature DOUBLE"


@lf.table(comment="raw device messages, as they arrived")
def raw_readings():
    return lf.source(
        "iot",
        totalRows=lf.config("rows", "2000"),  # lakefeed run ... --conf rows=N
        rowsPerSecond=1000,
        devices=10,
        startTime="2026-01-01T00:00:00Z",
        seed=1,
    )


@lf.table(comment="parsed readings; rows that do not parse go to readings_quarantine")
@lf.expect_or_drop("parsed", "event_id IS NOT NULL AND device_id IS NOT NULL")
@lf.expect("temperature_in_range", "temperature BETWEEN -60 AND 150")
def readings():
    parsed = lf.read_stream("raw_readings").select(F.from_json("value", PAYLOAD).alias("r"))
    return parsed.select("r.*")
'''

PIPELINE_SQL = """-- {name}: readings and mean temperature per device, recomputed on each run.
CREATE OR REFRESH MATERIALIZED VIEW device_stats
COMMENT 'readings and mean temperature per device'
AS SELECT device_id, count(*) AS readings, avg(temperature) AS avg_temperature
   FROM readings
   GROUP BY device_id;
"""

TEST_PY = '''"""Runs the pipeline on a temporary lakehouse and checks what lands in its tables."""

import json
from datetime import UTC, datetime
from pathlib import Path

from deltalake import DeltaTable

import lakefeed as lf
from lakefeed.testing import PipelineTest

PIPELINE = Path(__file__).resolve().parents[1] / "pipeline"
CONF = {{"rows": "200"}}  # a small, fixed input: the generator is deterministic


def rows(lakehouse: Path, table: str) -> list[dict]:
    path = lakehouse / "tables" / table
    if not (path / "_delta_log").is_dir():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def test_pipeline_is_valid(tmp_path: Path) -> None:
    report = lf.validate(PIPELINE, lakehouse=tmp_path, conf=CONF)
    assert report.ok, report.problems


def test_pipeline_fills_its_tables(tmp_path: Path) -> None:
    result = lf.run(PIPELINE, lakehouse=tmp_path, mode="available-now", conf=CONF)
    assert result.ok, result.failed
    raw = rows(tmp_path, "raw_readings")
    readings = rows(tmp_path, "readings")
    quarantine = rows(tmp_path, "readings_quarantine")
    assert len(raw) == 200
    assert len(readings) + len(quarantine) == len(raw)
    assert all(r["event_id"] is not None for r in readings)
    stats = rows(tmp_path, "device_stats")
    assert sum(s["readings"] for s in stats) == len(readings)


def test_unparsable_rows_go_to_quarantine(tmp_path: Path) -> None:
    """Your own rows instead of the generator's: one micro-batch, then what landed."""
    pipe = PipelineTest(PIPELINE, tmp_path)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    good = {{"event_id": "e1", "device_id": "d1", "event_time": at.isoformat()}}
    pipe.feed(
        "raw_readings",
        [
            {{"offset": 0, "ingest_time": at, "device_id": "d1", "value": json.dumps(good)}},
            {{"offset": 1, "ingest_time": at, "device_id": "d1", "value": "not json"}},
        ],
    )
    pipe.step()
    assert [r["event_id"] for r in pipe.rows("readings")] == ["e1"]
    assert len(pipe.quarantine("readings")) == 1
    assert pipe.expectations("readings")["parsed"] == {{"passed": 1, "failed": 1}}
'''

README = """# {name}

A streaming lakehouse pipeline on [lakefeed](https://pypi.org/project/lakefeed/): raw device
readings from lakefeed's IoT generator (`pipeline/readings.py`), parsed and checked with
expectations, and a SQL materialized view of per-device statistics
(`pipeline/device_stats.sql`). Tables are Delta tables under `./lakehouse/tables`.

```bash
lakefeed validate pipeline                        # the graph and its problems; starts nothing
lakefeed run pipeline --mode available-now        # process what is there, then stop
lakefeed run pipeline --mode available-now --conf rows=100000   # more input (a configuration)
lakefeed run pipeline --mode continuous --ui      # keep running, with the web UI
lakefeed events -n 20                             # what happened, from the event log
python -m pip install pytest                      # once, if this environment lacks it
python -m pytest tests                            # run the pipeline on a temp lakehouse
```
"""

GITIGNORE = "lakehouse/\n__pycache__/\n.pytest_cache/\n"

FILES = {
    "pipeline/readings.py": PIPELINE_PY,
    "pipeline/device_stats.sql": PIPELINE_SQL,
    "tests/test_pipeline.py": TEST_PY,
    "README.md": README,
    ".gitignore": GITIGNORE,
}


def create_project(target: str | Path) -> Path:
    """Write a new project into folder ``target`` (which must not exist or be empty)."""
    folder = Path(target)
    name = folder.name
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ConfigError(
            f"project name {name!r} is not a Python identifier",
            fix="use letters, digits and underscores, e.g. lakefeed init my_pipeline",
        )
    if folder.exists() and any(folder.iterdir()):
        raise ConfigError(
            f"{folder} exists and is not empty",
            fix="choose a new name, or remove the folder",
        )
    for relative, template in FILES.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(name=name))
    return folder
