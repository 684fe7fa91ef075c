"""cloudFiles with its landing folder, schema location, checkpoint and table on S3 (moto).

The Spark-free test drives the file log, the schema store, the Python reader and cleanSource
against the server directly (under a second). The Spark tests run the crash driver of
``tests/connectors/files`` on S3 in subprocesses (sessions with S3A cannot be the shared test
session): Spark's reader run twice with files landing in between, and lakefeed's reader killed
with -9.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from lakefeed.connectors.files import filelog
from lakefeed.connectors.files.cleanup import clean_committed
from lakefeed.connectors.files.filelog import FileLog, committed_files, state_dir
from lakefeed.connectors.files.options import FileSourceOptions, OptionError
from lakefeed.connectors.files.plan import ReadPlan
from lakefeed.connectors.files.readers import read_entry
from lakefeed.connectors.files.schemas import SchemaStore, infer_schema, parse_ddl
from lakefeed.connectors.files.source import claim_skipped, skipped_files
from lakefeed.core import storage
from lakefeed.runtime.connections import check_connections
from tests.connectors.files.crash_driver import FILES_PER_RUN, ROWS_PER_FILE
from tests.support.crash import kill_soon_after_progress, run_driver_with_kills
from tests.support.delta import commit_count
from tests.support.s3 import MotoServer

ROOT = Path(__file__).resolve().parents[3]
DRIVER = ROOT / "tests" / "connectors" / "files" / "crash_driver.py"


def _land(uri: str, rows: list[dict]) -> None:
    storage.write_bytes(uri, "".join(json.dumps(r) + "\n" for r in rows).encode())


def _opts(land: str, schema: str, **extra: str) -> FileSourceOptions:
    return FileSourceOptions.parse(
        {"path": land, "cloudFiles.format": "json", "cloudFiles.schemaLocation": schema, **extra}
    )


def test_file_log_schemas_reader_and_cleanup_on_s3(
    moto: MotoServer, s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = f"s3://{moto.bucket()}"
    land, schema = f"{root}/land", f"{root}/schema"
    _land(f"{land}/day=1/a.json", [{"id": 1}])
    _land(f"{land}/day=1/_tmp.json", [{"id": 0}])  # hidden, as on disk
    _land(f"{land}/day=2/b.json", [{"id": 2, "extra": "x"}])
    opts = _opts(land, schema, pathGlobFilter="*.json")
    log = FileLog.open(schema, opts.matcher, include_existing=True)
    assert log.discover() == 2 and log.discover() == 0
    _land(f"{land}/day=3/c.json", [{"id": 3}])
    assert log.discover() == 1
    assert [e.path for e in log.entries(0, 3)][-1] == f"{land}/day=3/c.json"
    segments = state_dir(schema) / filelog.SEGMENTS
    assert [p.name for p in storage.listing(segments)] == [f"{0:020d}.log", f"{2:020d}.log"]

    # A restart reads the same log; many segments are merged into one first.
    monkeypatch.setattr(filelog, "MAX_SEGMENTS", 1)
    again = FileLog.open(schema, opts.matcher, include_existing=True)
    assert again.entries(0, 3) == log.entries(0, 3) and again.discover() == 0
    assert [p.name for p in storage.listing(segments)] == [f"{0:020d}.log"]
    assert committed_files(schema, 2) == log.entries(0, 2)
    # A second stream on the same schema location is stopped by the segment it would overwrite.
    _land(f"{land}/day=4/d.json", [{"id": 4}])
    assert again.discover() == 1
    with pytest.raises(OptionError, match="another stream appended"):
        log.discover()

    # validate --check-connections looks at the landing prefix.
    found = check_connections({"bronze": [("cloudFiles", {"path": f"{land}/day=*"})]})
    absent = check_connections({"bronze": [("cloudFiles", {"path": f"{root}/nothing"})]})
    assert [c.ok for c in found + absent] == [True, False]

    # includeExistingFiles=false: what is there at the first start is marked seen on S3 too.
    fresh = FileLog.open(f"{root}/schema2", opts.matcher, include_existing=False)
    _land(f"{land}/day=5/e.json", [{"id": 5}])
    assert fresh.discover() == 1 and fresh.entries(0, 1)[0].path == f"{land}/day=5/e.json"

    # Schema inference and evolution files live under the S3 schema location.
    inferred = infer_schema([e.path for e in log.entries(0, 2)], opts)
    assert inferred.names == ["id", "extra"]
    store = SchemaStore(schema)
    assert store.create(0, inferred, "inferred") and not store.create(0, inferred, "again")
    assert store.add_columns(parse_ddl("more STRING").fields, "new") == 1
    assert store.latest() == (1, parse_ddl("id STRING, extra STRING, more STRING"))

    # lakefeed's reader reads objects; _metadata gives the URI; skipped files are recorded there.
    plan = ReadPlan(opts, parse_ddl("id BIGINT"), "none", "_rescued_data", True, schema)
    rows = pa.Table.from_batches(list(read_entry(log.entries(1, 2)[0], plan))).to_pylist()
    assert rows[0]["id"] == 2 and rows[0]["_metadata"]["file_path"] == f"{land}/day=2/b.json"
    assert '"extra":"x"' in rows[0]["_rescued_data"]
    missing = _opts(land, schema, ignoreMissingFiles="true")
    gone = filelog.FileEntry(f"{land}/gone.json", 3, 0)
    assert (
        list(
            read_entry(gone, ReadPlan(missing, parse_ddl("id BIGINT"), "none", None, True, schema))
        )
        == []
    )
    assert [r["path"] for r in skipped_files(schema)] == [gone.path]
    options = {"path": land, "cloudFiles.schemaLocation": schema}
    assert (
        len(claim_skipped(options, "event_log")) == 1 and claim_skipped(options, "event_log") == []
    )

    # cleanSource on S3: MOVE keeps the relative path under the archive, DELETE removes.
    archive = f"{root}/archive"
    moving = _opts(
        land,
        schema,
        **{"cloudFiles.cleanSource": "MOVE", "cloudFiles.cleanSource.moveDestination": archive},
    )
    clean_committed(log.entries(0, 1), moving)
    clean_committed(log.entries(0, 1), moving)  # a repeated commit finds it gone: fine
    assert storage.files_under(archive) == ["day=1/a.json"]
    clean_committed(log.entries(1, 2), _opts(land, schema, **{"cloudFiles.cleanSource": "DELETE"}))
    assert not storage.exists(f"{land}/day=2/b.json")
    with pytest.raises(OptionError, match="same storage"):
        from lakefeed.connectors.files.source import CloudFilesDataSource

        CloudFilesDataSource(
            {
                **options,
                "cloudFiles.format": "json",
                "cloudFiles.cleanSource": "MOVE",
                "cloudFiles.cleanSource.moveDestination": "/tmp/archive",
            }
        ).streamReader(parse_ddl("id STRING"))


def _table(root: str) -> pa.Table:
    return DeltaTable(f"{root}/dst").to_pyarrow_table()


def _every_file_once(root: str, runs: int) -> None:
    table = _table(root)
    landed = storage.files_under(f"{root}/land")
    assert len(landed) == runs * FILES_PER_RUN
    assert table.num_rows == len(landed) * ROWS_PER_FILE
    keys = pc.binary_join_element_wise(table["path"], pc.cast(table["line"], "string"), ":")
    assert pc.count_distinct(keys).as_py() == table.num_rows  # no row twice
    assert set(table["path"].to_pylist()) == {f"{root}/land/{k}" for k in landed}  # s3 URIs


@pytest.mark.crash
@pytest.mark.soak  # the second reader on S3: tests/connectors/files proves both readers
@pytest.mark.timeout(900)
def test_spark_reader_on_s3_picks_up_files_landing_between_runs(
    moto: MotoServer, s3_env: dict[str, str], tmp_path: Path
) -> None:
    root = f"s3://{moto.bucket()}/files"
    report = run_driver_with_kills(  # two runs, neither killed: the second lands 6 more files
        DRIVER,
        root,
        "spark",
        workdir=tmp_path,
        kills=1,
        kill_when=lambda _: False,
        min_delay=600,
        max_delay=600,
        env=moto.env(),
        final_timeout=400,
    )
    assert report.kills == 0 and report.finished_early == 1 and report.runs == 2
    _every_file_once(root, runs=2)


@pytest.mark.crash
@pytest.mark.soak  # kill -9 on S3: test_pipeline here; the reader: tests/connectors/files
@pytest.mark.timeout(1200)
def test_python_reader_on_s3_each_file_once_across_kills(
    moto: MotoServer, s3_env: dict[str, str], tmp_path: Path
) -> None:
    root = f"s3://{moto.bucket()}/files"
    commits = functools.partial(commit_count, storage.as_path(f"{root}/dst"))
    report = run_driver_with_kills(
        DRIVER,
        root,
        "python",
        workdir=tmp_path,
        kills=2,
        kill_when=kill_soon_after_progress(commits, seed=3, within=1.0),
        min_delay=180,
        max_delay=180,
        env=moto.env(),
        final_timeout=400,
    )
    # a run whose batches all end before its kill moment exits 0 by itself (files landed alike)
    assert report.kills >= 1 and report.kills + report.finished_early == 2, report
    _every_file_once(root, runs=3)


PIPELINE_DRIVER = """
import sys
import lakefeed as lf
from lakefeed.core import storage

lakehouse, landing, wave2 = sys.argv[1:4]
conf = {{"files.landing": landing, "files.maxFilesPerTrigger": "2"}}
spark = lf.spark_session(
    master="local[2]", conf={{"spark.ui.enabled": "false"}}, storage=[lakehouse]
)
assert lf.run({example!r}, lakehouse=lakehouse, conf=conf, spark=spark).ok
for name in storage.files_under(wave2):  # the exporter adds a column: evolution on S3
    storage.write_bytes(f"{{landing}}/{{name}}", storage.read_bytes(f"{{wave2}}/{{name}}"))
# bronze gains the column; silver stops once on its changed source (Delta's rule), then resumes
try:
    lf.run({example!r}, lakehouse=lakehouse, conf=conf, spark=spark)
except lf.PipelineError as stopped:
    print("stopped once:", stopped)
assert lf.run({example!r}, lakehouse=lakehouse, conf=conf, spark=spark).ok
check = lf.verify({example!r}, lakehouse=lakehouse, conf=conf, spark=spark, run_first=False)
print("verified", [(t.table, t.equal) for t in check.tables])
sys.exit(0 if check.ok else 1)
"""


@pytest.mark.crash
@pytest.mark.soak  # a combination: evolution and verify run locally, the files source on S3 above
@pytest.mark.timeout(900)
def test_file_ingest_pipeline_on_s3_evolves_and_verifies(
    moto: MotoServer, s3_env: dict[str, str], tmp_path: Path
) -> None:
    """examples/file_ingest with its lakehouse and landing folder on S3: a run, a second wave
    with a new column (its schema version written on S3, bronze restarted by the runtime), runs
    until every flow is through, then ``verify`` (the batch side reads the committed files
    from the file log's segments on S3)."""
    sys.path.insert(0, str(ROOT / "examples" / "file_ingest"))
    from land import land_wave

    bucket = f"s3://{moto.bucket()}"
    lakehouse, landing = f"{bucket}/lh", f"{bucket}/landing"
    valid = 0
    for wave in (1, 2):
        valid += land_wave(tmp_path / f"wave{wave}", wave)
        for local in sorted((tmp_path / f"wave{wave}").rglob("*.json")):
            target = f"{bucket}/wave{wave}/{local.relative_to(tmp_path / f'wave{wave}')}"
            storage.write_bytes(target, local.read_bytes())
    for name in storage.files_under(f"{bucket}/wave1"):
        storage.write_bytes(f"{landing}/{name}", storage.read_bytes(f"{bucket}/wave1/{name}"))
    driver = tmp_path / "driver.py"
    driver.write_text(PIPELINE_DRIVER.format(example=str(ROOT / "examples" / "file_ingest")))
    report = run_driver_with_kills(
        driver,
        lakehouse,
        landing,
        f"{bucket}/wave2",
        workdir=tmp_path,
        kills=0,
        env=moto.env(),
        final_timeout=600,
    )
    log = report.logs[-1]  # the driver exits 0 only when verify found every table equal
    assert "verified [('bronze_orders', True)" in log, log[-3000:]
    bronze = DeltaTable(f"{lakehouse}/tables/bronze_orders").to_pyarrow_table()
    assert bronze.num_rows == 400 and "coupon" in bronze.column_names, log[-6000:]
    assert pc.count_distinct(bronze["source_file"]).as_py() == 8
    assert all(p.startswith(f"{landing}/") for p in bronze["source_file"].to_pylist())
    silver = DeltaTable(f"{lakehouse}/tables/silver_orders").to_pyarrow_table()
    assert silver.num_rows == valid
    schemas = storage.list_names(f"{lakehouse}/schemas/bronze_orders/_schemas")
    assert sorted(schemas) == ["0", "1"]  # inferred, then the new column
    assert moto.env()["AWS_SECRET_ACCESS_KEY"] not in log
