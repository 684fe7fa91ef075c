"""Row tracking (issue 33): lakefeed turns it on (CREATE TABLE / CTAS TBLPROPERTIES, the table
builder, ALTER TABLE SET TBLPROPERTIES with a backfill), and its deletion-vector UPDATE and
MERGE keep the ids of the rows they write anew in the materialized row-id column, as
delta-spark does. Row ids are read here from the files themselves (PROTOCOL.md "Row
Tracking": the materialized id when not null, else ``baseRowId`` + the row's position), so the
test checks what any Delta reader would see as ``_metadata.row_id``."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder, write_deltalake

import lakefeed as lf
from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.core.errors import ConflictError, DeltaError, code_of
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import create, dv, dv_write, files, log, log_writer, row_tracking, tblprops
from tests.delta.test_clustered_writes import make_clustered
from tests.delta.test_foreign_tables import python_read
from tests.pipeline.support import load, write
from tests.runtime.test_keys import PIPELINE

pytestmark = pytest.mark.compat  # format("delta") and SQL on the test session

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
ON = {"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true"}


def _row_ids(root: str, column: str = "id") -> dict[Any, tuple[int, int]]:
    """Each live row's key (its ``column``) -> (row id, row commit version), from the data
    files."""
    version = log.latest_version(root)
    assert version is not None
    live = log_writer.live_files(root, version)
    assert live is not None
    configuration = RsTable(root).metadata().configuration
    id_column = configuration[row_tracking.ROW_ID_NAME]
    version_column = configuration[row_tracking.COMMIT_VERSION_NAME]
    found: dict[Any, tuple[int, int]] = {}
    stored = _key(root, column)
    for add in live.values():
        data = pq.read_table(files.local_path(root, add["path"]))
        count = data.num_rows
        ids = pa.array(add["baseRowId"] + np.arange(count))
        versions = pa.array(np.full(count, add["defaultRowCommitVersion"]))
        if id_column in data.column_names:
            ids = pc.coalesce(data.column(id_column), ids)
        if version_column in data.column_names:
            versions = pc.coalesce(data.column(version_column), versions)
        descriptor = dv.Descriptor.from_json(add.get("deletionVector"))
        deleted = set() if descriptor is None else set(dv.deleted_rows(root, descriptor))
        rows = zip(
            data.column(stored).to_pylist(), ids.to_pylist(), versions.to_pylist(), strict=True
        )
        for position, (key, row_id, row_version) in enumerate(rows):
            if position not in deleted:
                assert key not in found, key
                found[key] = (row_id, row_version)
    assert len({row_id for row_id, _ in found.values()}) == len(found), "row ids are unique"
    return found


def _key(root: str, column: str = "id") -> str:
    """The name the files store ``column`` by (its physical name under column mapping)."""
    (field,) = [f for f in RsTable(root).schema().fields if f.name == column]
    return str(field.metadata.get("delta.columnMapping.physicalName", column))


def _mark(root: str) -> int:
    version = log.latest_version(root) or 0
    return json.loads(log_writer.domain(root, version, log_writer.ROW_TRACKING) or "{}")[
        "rowIdHighWaterMark"
    ]


def _append(spark, root: str, start: int, count: int) -> None:
    rows = [(i, f"v{i}") for i in range(start, start + count)]
    frame = spark.createDataFrame(rows, "id long, v string").coalesce(1)
    frame.write.format("delta").mode("append").save(root)


def _read(spark, root: str) -> list[tuple]:
    """The table's rows by lakefeed's Spark read, its Python reader and delta-rs's kernel
    reader: the same, without the materialized columns."""
    frame = spark.read.format("delta").load(root)
    assert frame.columns == ["id", "v"]
    rows = sorted(tuple(r) for r in frame.collect())
    kernel = pa.table(QueryBuilder().register("t", RsTable(root)).execute("select * from t"))
    assert kernel.column_names == ["id", "v"]
    assert sorted(tuple(r.values()) for r in kernel.to_pylist()) == rows
    python = python_read(root)
    assert python.column_names == ["id", "v"]
    assert sorted(tuple(r.values()) for r in python.to_pylist()) == rows
    return rows


def _created(tmp_path: Path, configuration: dict[str, str] = ON) -> str:
    root = str(tmp_path / "t")
    create.create(root, SCHEMA, configuration=configuration)
    return root


def test_a_new_table_turns_row_tracking_on_as_delta_spark_does(spark, tmp_path: Path) -> None:
    root = _created(tmp_path)
    protocol = RsTable(root).protocol()
    assert {"rowTracking", "domainMetadata"} <= set(protocol.writer_features or [])
    assert protocol.min_writer_version == 7
    configuration = RsTable(root).metadata().configuration
    assert configuration[row_tracking.ROW_ID_NAME].startswith("_row-id-col-")
    assert configuration[row_tracking.COMMIT_VERSION_NAME].startswith("_row-commit-version-col-")
    _append(spark, root, 0, 3)
    (add,) = log_writer.live_files(root, log.latest_version(root) or 0).values()
    assert add["baseRowId"] == 0 and _mark(root) == 2
    assert _row_ids(root) == {0: (0, 2), 1: (1, 2), 2: (2, 2)}


def test_sql_builder_and_ctas_turn_it_on(spark, tmp_path: Path) -> None:
    spark.sql(
        f"CREATE TABLE delta.`{tmp_path}/sql` (id BIGINT, v STRING) USING DELTA "
        "TBLPROPERTIES ('delta.enableRowTracking' = 'true')"
    )
    spark.sql(
        f"CREATE TABLE delta.`{tmp_path}/ctas` USING DELTA "
        "TBLPROPERTIES ('delta.enableRowTracking' = 'true') "
        "AS SELECT CAST(col1 AS BIGINT) AS id, 'x' AS v FROM VALUES 1, 2"
    )
    (
        DeltaTable.create(spark)
        .location(f"{tmp_path}/built")
        .addColumn("id", "BIGINT")
        .addColumn("v", "STRING")
        .property("delta.enableRowTracking", "true")
        .execute()
    )
    for name in ("sql", "ctas", "built"):
        table = RsTable(f"{tmp_path}/{name}")
        assert "rowTracking" in (table.protocol().writer_features or []), name
        assert row_tracking.ROW_ID_NAME in table.metadata().configuration, name
    assert sorted(k for k, _ in _row_ids(f"{tmp_path}/ctas").values()) == [0, 1]


def test_update_merge_and_delete_keep_row_ids(spark, tmp_path: Path) -> None:
    root = _created(tmp_path)
    _append(spark, root, 0, 5)
    _append(spark, root, 5, 5)
    before = _row_ids(root)
    api = DeltaTable.forPath(spark, root)
    api.update("id IN (1, 7)", {"v": "'changed'"})
    updated_at = log.latest_version(root)
    after = _row_ids(root)
    assert {k: i for k, (i, _) in after.items()} == {k: i for k, (i, _) in before.items()}
    assert after[1][1] == after[7][1] == updated_at and after[2] == before[2]
    api.delete("id = 3")
    source = spark.createDataFrame([(7, "merged"), (8, "merged"), (42, "new")], "id long, v string")
    (
        api.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    merged_at = log.latest_version(root)
    final = _row_ids(root)
    assert 3 not in final
    for key in (0, 1, 2, 4, 5, 6, 7, 8, 9):
        assert final[key][0] == before[key][0], key
    assert final[7][1] == final[8][1] == merged_at and final[1][1] == updated_at
    assert final[42][0] > max(i for i, _ in before.values())
    assert _mark(root) >= final[42][0]
    rows = dict(_read(spark, root))
    assert rows[7] == rows[8] == "merged" and rows[1] == "changed" and rows[42] == "new"
    live = log_writer.live_files(root, merged_at or 0) or {}
    for add in live.values():  # statistics of the table's columns only
        assert set(json.loads(add["stats"])["nullCount"]) == {"id", "v"}, add


@pytest.mark.parametrize("mode", [None, "name"])
def test_a_delta_spark_table_keeps_ids_it_materialized(
    spark, tmp_path: Path, mode: str | None
) -> None:
    """A table as delta-spark writes it (row tracking and deletion vectors on; column mapping
    too), with a file whose rows already carry materialized ids (a delta-spark UPDATE wrote
    them): lakefeed's UPDATE keeps those ids, not the file's ``baseRowId`` + position."""
    root = make_clustered(tmp_path / "t", mode, row_tracking=True)
    column = RsTable(root).metadata().configuration[row_tracking.ROW_ID_NAME]
    _materialize(root, column, {0: 100})
    before = _row_ids(root)
    assert before[0][0] == 100
    DeltaTable.forPath(spark, root).update("id IN (0, 7)", {"amount": "-1.0"})
    after = _row_ids(root)
    assert {k: i for k, (i, _) in after.items()} == {k: i for k, (i, _) in before.items()}
    assert spark.read.format("delta").load(root).columns == ["id", "region", "amount"]


def _materialize(root: str, column: str, ids: dict[int, int]) -> None:
    """Rewrite the table's files in place with the materialized row-id ``column`` holding
    ``ids`` (by the row's ``id``; null elsewhere), as a delta-spark UPDATE leaves files."""
    live = log_writer.live_files(root, log.latest_version(root) or 0) or {}
    for add in live.values():
        location = files.local_path(root, add["path"])
        data = pq.read_table(location)
        keys = data.column(_key(root)).to_pylist()
        values = pa.array([ids.get(k) for k in keys], pa.int64())
        pq.write_table(data.append_column(column, values), location)


def test_set_tblproperties_backfills_row_ids(spark, tmp_path: Path, monkeypatch) -> None:
    """One commit turns it on and gives the files row ids; a commit in between fails it, and
    so does a table of more files than one commit gives ids (coded, nothing written)."""
    root = _created(tmp_path, {"delta.enableDeletionVectors": "true"})
    _append(spark, root, 0, 4)
    stale = log.open_table(root)
    _append(spark, root, 4, 2)
    newest = log.latest_version(root)
    with pytest.raises(ConflictError):
        tblprops.set_properties(root, stale, {row_tracking.ENABLE: "true"})
    monkeypatch.setattr(tblprops, "BACKFILL_FILES", 1)
    with pytest.raises(DeltaError) as refused:
        tblprops.set_properties(root, log.open_table(root), {row_tracking.ENABLE: "true"})
    assert code_of(refused.value) == "DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED"
    assert log.latest_version(root) == newest
    monkeypatch.undo()
    spark.sql(f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.enableRowTracking' = true)")
    version = log.latest_version(root)
    actions = log.commit_actions(root, version or 0) or []
    backfilled = [a["add"] for a in actions if "add" in a]
    assert len(backfilled) == 2 and not any(a["dataChange"] for a in backfilled)
    ids = _row_ids(root)
    assert sorted(i for i, _ in ids.values()) == list(range(6)) and _mark(root) == 5
    DeltaTable.forPath(spark, root).update("id = 2", {"v": "'x'"})
    assert _row_ids(root)[2][0] == ids[2][0]
    assert len(_read(spark, root)) == 6


def test_a_concurrent_append_during_an_update_keeps_ids_unique(spark, tmp_path: Path) -> None:
    """The UPDATE plans on one version, an append commits the next; the UPDATE's new file
    takes ids after the append's (Delta's rules: a blind append does not conflict)."""
    root = _created(tmp_path)
    _append(spark, root, 0, 5)
    table = log.open_table(root)  # the UPDATE's snapshot, before the append
    _append(spark, root, 5, 5)
    dv_write.update(table, root, {"v": "'u'"}, "id = 2", None)
    ids = _row_ids(root)  # unique, asserted there
    assert len(ids) == 10 and ids[2][0] == 2
    assert _mark(root) == 9 + 1  # the UPDATE's file of one row came after the append's ids


def test_row_tracking_mark_is_monotonic_under_concurrent_appends(spark, tmp_path: Path) -> None:
    root = _created(tmp_path)
    threads = [
        threading.Thread(target=_append, args=(spark, root, start, 3)) for start in (0, 10, 20)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    marks = [
        json.loads(
            log_writer.domain(root, v, log_writer.ROW_TRACKING) or '{"rowIdHighWaterMark": -1}'
        )["rowIdHighWaterMark"]
        for v in range((log.latest_version(root) or 0) + 1)
    ]
    assert marks == sorted(marks) and marks[-1] == 8
    assert sorted(i for i, _ in _row_ids(root).values()) == list(range(9))


def _append_source(src: Path, pages: list[str], at: int) -> None:
    """Clicks on ``pages`` at time ``at`` into the pipeline's source table."""
    rows = pa.table({"page": pages, "at": pa.array([at] * len(pages), pa.int64())})
    write_deltalake(str(src), rows, mode="append")


def test_a_keyed_pipeline_table_keeps_row_ids_across_its_merges(spark, tmp_path: Path) -> None:
    """A pipeline's ``table_properties`` turn row tracking on; the keys' MERGE of the second
    run moves the updated rows with their ids and gives a new key a fresh one."""
    src = tmp_path / "clicks"
    _append_source(src, ["/", "/cart"], 1)
    properties = '{"delta.enableRowTracking": "true", "delta.enableDeletionVectors": "true"}'
    text = PIPELINE.replace('keys=["page"]', f'keys=["page"], table_properties={properties}')
    folder = write(tmp_path / "p", {"views.py": text})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    conf = {"src": str(src)}
    assert lf.run(load([folder], conf), lakehouse=lakehouse, spark=spark).ok
    root = str(lakehouse.table_path("page_views"))
    assert "rowTracking" in (RsTable(root).protocol().writer_features or [])
    first = _row_ids(root, "page")
    _append_source(src, ["/cart", "/pay"], 2)
    assert lf.run(load([folder], conf), lakehouse=lakehouse, spark=spark).ok
    after = _row_ids(root, "page")
    assert after["/cart"][0] == first["/cart"][0] and after["/"] == first["/"]
    assert after["/pay"][0] > max(i for i, _ in first.values())
    assert after["/cart"][1] > first["/cart"][1]  # changed in the second run's commit
