"""Writes into tables with the writer features delta-spark and Databricks turn on for clustered
and managed tables (issue 33): ``domainMetadata``, ``clustering``, ``inCommitTimestamp``.
delta-rs refuses to commit there; lakefeed commits its appends, stream batches, overwrites and
deletion-vector DELETE/UPDATE/MERGE itself, keeping the clustering domain, writing an in-commit
timestamp per commit and statistics of the clustering columns. Tables are made at test time as
delta-spark writes them (:mod:`tests.delta.foreign`); rows are checked with delta-rs's kernel
reader (``QueryBuilder``) and lakefeed's readers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable

from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.connectors import delta
from lakefeed.core.errors import code_of
from lakefeed.delta import commit, features, files, log, log_writer
from tests.delta.foreign import START_MS, TableMaker
from tests.delta.test_foreign_tables import _sorted, _spark_rows, expected, python_read

pytestmark = pytest.mark.compat

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.float64())])
CLUSTERING = "delta.clustering"
OWN = ["domainMetadata", "clustering", "inCommitTimestamp"]
ROW_TRACKING_ON = "delta.enableRowTracking"
ROW_DOMAIN = "delta.rowTracking"
REFUSED = "DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED"
APP = "5eed0033-0000-4000-8000-000000000033"


@dataclass
class _Stamped(TableMaker):
    """delta-spark's commits with in-commit timestamps on: ``inCommitTimestamp`` first in
    every ``commitInfo``."""

    def commit(self, operation: str, actions: list[dict]) -> int:
        version = super().commit(operation, actions)
        target = Path(log.commit_path(str(self.root), version))
        lines = [json.loads(line) for line in target.read_text().splitlines()]
        lines[0]["commitInfo"] = {
            "inCommitTimestamp": START_MS + version * 60_000,
            **lines[0]["commitInfo"],
        }
        target.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return version


def _rows(start: int, count: int) -> pa.Table:
    regions = ["eu", "us", "apac"]
    return pa.table(
        {
            "id": list(range(start, start + count)),
            "region": [regions[i % 3] for i in range(start, start + count)],
            "amount": [i * 1.5 for i in range(start, start + count)],
        },
        schema=SCHEMA,
    )


def make_clustered(
    root: Path, mode: str | None = None, dvs: bool = True, row_tracking: bool = False
) -> str:
    """A table clustered by ``region`` as delta-spark creates it (``CLUSTER BY (region)``,
    in-commit timestamps and deletion vectors on; ``row_tracking`` too), then one append:
    two commits."""
    readers = (["deletionVectors"] if dvs else []) + (["columnMapping"] if mode else [])
    tracking = ["rowTracking"] if row_tracking else []
    config = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "0",
        "delta.inCommitTimestampEnablementTimestamp": str(START_MS),
    }
    if dvs:
        config["delta.enableDeletionVectors"] = "true"
    if row_tracking:
        config[ROW_TRACKING_ON] = "true"
        config["delta.rowTracking.materializedRowIdColumnName"] = "_row-id-col-33"
        config["delta.rowTracking.materializedRowCommitVersionColumnName"] = "_row-cv-col-33"
    writers = readers + OWN + tracking
    maker = _Stamped(root, SCHEMA, [], config, readers, writers, (3, 7), mode, seed=33)
    domain = {"clusteringColumns": [[maker.mapping.name("region")]]}
    adds = [maker.add(_rows(0, 6))]
    actions = [{"protocol": maker.protocol()}, {"metaData": maker.metadata()}]
    actions.append(
        {
            "domainMetadata": {
                "domain": CLUSTERING,
                "configuration": json.dumps(domain),
                "removed": False,
            }
        }
    )
    if row_tracking:
        adds[0].update(baseRowId=0, defaultRowCommitVersion=0)
        actions.append(_high_water_mark(5))
    maker.commit("CREATE TABLE", actions + [{"add": a} for a in adds])
    if not row_tracking:
        maker.append(_rows(6, 3))
        return str(root)
    add = {**maker.add(_rows(6, 3)), "baseRowId": 6, "defaultRowCommitVersion": 1}
    maker.commit("WRITE", [{"add": add}, _high_water_mark(8)])
    return str(root)


def _high_water_mark(mark: int) -> dict:
    configuration = json.dumps({"rowIdHighWaterMark": mark})
    action = {"domain": ROW_DOMAIN, "configuration": configuration, "removed": False}
    return {"domainMetadata": action}


def _log(root: str) -> list[list[dict]]:
    """Every commit's actions, oldest first."""
    newest = log.latest_version(root) or 0
    return [log.commit_actions(root, version) or [] for version in range(newest + 1)]


def _check_log(root: str, domain_physical: str = "region") -> None:
    """The clustering domain is as delta-spark wrote it (no later commit touches it), every
    commit has an in-commit timestamp later than the one before, and every file lakefeed added
    has statistics of the clustering column."""
    commits = _log(root)
    domains = [a["domainMetadata"] for c in commits for a in c if "domainMetadata" in a]
    domains = [d for d in domains if d["domain"] == CLUSTERING]
    assert len(domains) == 1
    assert json.loads(domains[0]["configuration"]) == {"clusteringColumns": [[domain_physical]]}
    stamps = [next(a["commitInfo"] for a in c if "commitInfo" in a) for c in commits]
    times = [info["inCommitTimestamp"] for info in stamps]
    assert times == sorted(set(times)), times
    assert all("commitInfo" in c[0] for c in commits)  # ICT: commitInfo first
    for actions in commits[2:]:
        for add in (a["add"] for a in actions if "add" in a):
            stats = json.loads(add["stats"])
            assert domain_physical in stats["minValues"], add


def test_a_batch_append_commits_through_lakefeed(spark, tmp_path: Path) -> None:
    root = make_clustered(tmp_path / "t")
    before = expected(root)
    spark.createDataFrame(_rows(9, 4).to_pandas()).write.format("delta").mode("append").save(root)
    after = expected(root)
    assert len(after) == len(before) + 4
    assert _spark_rows(spark.read.format("delta").load(root)) == after
    assert _sorted(python_read(root)) == after
    info = next(a["commitInfo"] for a in _log(root)[-1] if "commitInfo" in a)
    assert info["operation"] == "WRITE" and info["isBlindAppend"] is True
    _check_log(root)


def test_a_stream_appends_exactly_once(tmp_path: Path) -> None:
    """A stream batch's commit carries its ``txn``: the batch replayed after a kill (a new
    process: a fresh snapshot) is skipped and the files the replay wrote are removed."""
    from lakefeed.delta import snapshot

    root = make_clustered(tmp_path / "t")
    spec = commit.WriteSpec(root, "append", (), operation="STREAMING UPDATE")
    rows = _rows(20, 5).to_batches()[0]
    for batch_id in (0, 1):
        written = files.write_batches(
            root, iter([rows]), (), files.stream_file_prefix(APP, batch_id) + "00000-"
        )
        result = commit.commit_stream_batch(spec, written, rows.schema, APP, batch_id)
        assert not result.skipped
    snapshot._streams.clear()  # the driver was killed: the replay opens the table afresh
    again = files.write_batches(root, iter([rows]), (), files.stream_file_prefix(APP, 1) + "00000-")
    replayed = commit.commit_stream_batch(spec, again, rows.schema, APP, 1)
    assert replayed.skipped and replayed.removed_orphans == len(again)
    assert len(expected(root)) == 9 + 10
    assert RsTable(root).transaction_version(APP) == 1
    txns = [a["txn"] for c in _log(root) for a in c if "txn" in a]
    assert [t["version"] for t in txns] == [0, 1]
    _check_log(root)


def test_a_streaming_query_and_a_pipeline_style_overwrite(spark, tmp_path: Path) -> None:
    root = make_clustered(tmp_path / "t", mode="name")
    domain = next(a["domainMetadata"] for a in _log(root)[0] if "domainMetadata" in a)
    physical = json.loads(domain["configuration"])["clusteringColumns"][0][0]
    assert physical != "region"  # column mapping: the domain names the physical column
    landing = tmp_path / "landing"
    spark.createDataFrame(_rows(30, 4).to_pandas()).write.parquet(str(landing))
    stream = spark.readStream.schema("id long, region string, amount double").parquet(str(landing))
    query = delta.write_stream(stream, root, str(tmp_path / "cp"))
    query.processAllAvailable()
    query.stop()
    assert len(expected(root)) == 9 + 4
    assert _spark_rows(spark.read.format("delta").load(root)) == expected(root)
    spark.read.format("delta").load(root).where("id >= 30").write.format("delta").mode(
        "overwrite"
    ).save(root)
    assert [r[0] for r in expected(root)] == [30, 31, 32, 33]
    assert _spark_rows(spark.read.format("delta").load(root)) == expected(root)
    _check_log(root, physical)


def test_delete_update_merge_with_deletion_vectors(spark, tmp_path: Path) -> None:
    root = make_clustered(tmp_path / "t")
    api = DeltaTable.forPath(spark, root)
    api.delete("id = 1")
    api.update("id = 2", {"amount": "-1.0"})
    source = spark.createDataFrame(
        [(3, "eu", 9.0), (99, "us", 1.0)], "id long, region string, amount double"
    )
    (
        api.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    rows = {r[0]: r for r in expected(root)}
    assert 1 not in rows and rows[2][2] == -1.0 and rows[3][2] == 9.0 and 99 in rows
    assert len(rows) == 9
    assert _spark_rows(spark.read.format("delta").load(root)) == expected(root)
    assert any("deletionVector" in a.get("add", {}) for c in _log(root) for a in c)
    _check_log(root)


def test_what_lakefeed_cannot_honour_stays_refused(spark, tmp_path: Path) -> None:
    """Without deletion vectors a DELETE would go to delta-rs: refused, coded, nothing
    written (object storage: tests/system/s3/test_own_commits.py). An overwriteSchema write
    keeps the clustering columns."""
    root = make_clustered(tmp_path / "t", dvs=False)
    version = log.latest_version(root)
    with pytest.raises(Exception) as error:
        DeltaTable.forPath(spark, root).delete("id = 1")
    assert code_of(error.value) == REFUSED and "clustering" in str(error.value)
    frame = spark.createDataFrame(_rows(0, 1).to_pandas())
    schema_overwrite = (
        frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
    )
    with pytest.raises(Exception) as error:
        frame.drop("region").write.format("delta").mode("overwrite").option(
            "overwriteSchema", "true"
        ).save(root)
    assert code_of(error.value) == "DELTA_COLUMN_NOT_FOUND"
    assert log.latest_version(root) == version
    schema_overwrite.save(root)  # same columns: an overwrite through lakefeed
    frame.withColumn("extra", frame.id * 2).write.format("delta").mode("overwrite").option(
        "overwriteSchema", "true"
    ).save(root)
    assert expected(root) == [(0, "eu", 0.0, 0)]
    assert log.rs_table(root).schema().fields[-1].name == "extra"
    _check_log(root)
    table = log.rs_table(root)
    assert features.unwritable(table, own_commit=True, root=root) == []
    assert features.unwritable(table) == sorted(OWN)


def _check_row_ids(root: str) -> None:
    """Every live file has row ids of its own (no two overlap), the high water mark covers
    them, and a file's default row commit version is at most the version that added it."""
    version = log.latest_version(root)
    assert version is not None
    live = log_writer.live_files(root, version)
    assert live is not None
    commits = _log(root)
    spans = []
    for add in live.values():
        records = json.loads(add["stats"])["numRecords"]
        spans.append((add["baseRowId"], add["baseRowId"] + records - 1))
        paths = [{a["add"]["path"] for a in c if "add" in a} for c in commits]
        first = next(v for v, added in enumerate(paths) if add["path"] in added)
        assert add["defaultRowCommitVersion"] == first
    spans.sort()
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
    mark = json.loads(log_writer.domain(root, version, ROW_DOMAIN) or "{}")["rowIdHighWaterMark"]
    assert mark >= spans[-1][1]


def test_row_tracking_tables_get_fresh_row_ids(spark, tmp_path: Path) -> None:
    """Appends, a stream batch and a deletion-vector DELETE into a table with row tracking:
    new files get row ids after the high water mark, a file added back with a deletion
    vector keeps its own; UPDATE moves its rows with their ids (tests/delta/test_row_tracking)."""
    root = make_clustered(tmp_path / "t", row_tracking=True)
    spark.createDataFrame(_rows(9, 4).to_pandas()).write.format("delta").mode("append").save(root)
    rows = _rows(20, 2).to_batches()[0]
    spec = commit.WriteSpec(root, "append", (), operation="STREAMING UPDATE")
    prefix = files.stream_file_prefix(APP, 0) + "00000-"
    written = files.write_batches(root, iter([rows]), (), prefix)
    commit.commit_stream_batch(spec, written, rows.schema, APP, 0)
    DeltaTable.forPath(spark, root).delete("id = 1")
    _check_row_ids(root)
    newest = log.latest_version(root) or 0
    found = json.loads(log_writer.domain(root, newest, ROW_DOMAIN) or "{}")
    assert found == {"rowIdHighWaterMark": 8 + 4 + 2}
    assert len(expected(root)) == 9 + 4 + 2 - 1
    DeltaTable.forPath(spark, root).update("id = 2", {"amount": "0.0"})
    _check_row_ids(root)
    _check_log(root)


def test_the_compatibility_page_lists_the_writer_features_of_the_code() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "delta-compatibility.md").read_text()
    start = page.index("<!-- writer-features")
    table = page[page.index("\n", start) + 1 : page.index("<!-- /writer-features -->")]
    assert table.strip() == features.feature_table()


@pytest.mark.crash
@pytest.mark.timeout(1800)
def test_a_stream_into_a_clustered_table_survives_sigkill_exactly_once(
    tmp_path: Path, artifacts: Path
) -> None:
    """The streaming sink's batches commit through lakefeed's own log writer here (the table
    is clustered): killed twice, once right after a Delta commit before Spark's commit log
    has the batch (tests/connectors/delta/test_crash.py kills its plain-table twin five times),
    the table still holds every row once, and its domain is kept."""
    from deltalake import write_deltalake

    from lakefeed.delta import clustering, create
    from tests.connectors.delta.crash_driver import _query_id
    from tests.support.crash import ahead_of_spark, read_runs, run_delta_driver_with_kills
    from tests.support.delta import unreferenced_files

    commits, rows = 12, 100
    for c in range(commits):
        ids = range(c * rows, (c + 1) * rows)
        frame = {"id": pa.array(ids, pa.int64()), "payload": [f"row-{i}" for i in ids]}
        write_deltalake(str(tmp_path / "src"), pa.table(frame), mode="append")
    schema = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("payload", pa.string())])
    create.create(str(tmp_path / "dst"), schema, cluster_by=["k"])
    driver = Path(__file__).parents[1] / "connectors" / "delta" / "crash_driver.py"
    report = run_delta_driver_with_kills(driver, tmp_path, "clustered", kills=2, seed=33)
    assert report.kills == 1 and report.runs == 3
    runs = read_runs(tmp_path, artifacts / "clustered_crash_runs.json")
    assert ahead_of_spark(runs), f"no restart found the Delta commit ahead of Spark's: {runs}"
    root = str(tmp_path / "dst")
    assert sorted(row[0] for row in expected(root)) == list(range(commits * rows))
    assert unreferenced_files(tmp_path / "dst") == set()
    assert clustering.columns_of(root, log.rs_table(root)) == ["k"]
    assert log.rs_table(root).transaction_version(_query_id(tmp_path) or "") is not None
