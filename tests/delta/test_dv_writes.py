"""Writes into tables with deletion vectors (``dv-partitioned``, made at test time as
delta-spark writes it, :mod:`tests.delta.foreign`): every write path honours the rows the
table's deletion vectors delete.

The expected rows are the table's rows before the write as delta-rs's kernel reader
(``QueryBuilder``) returns them, changed in Python; the result must read the same through
QueryBuilder and through lakefeed's reader. A rewritten file's ``remove`` must carry the
file's ``deletionVector`` (PROTOCOL.md: a logical file is its path and its DV's ``uniqueId``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, TableFeatures, write_deltalake

from lakefeed.core import storage
from lakefeed.core.errors import ConflictError, code_of
from lakefeed.delta import create, dv, files, log, log_writer, merger, operations
from lakefeed.delta import table as tables
from tests.delta.test_foreign_tables import _sorted, expected, python_read

pytestmark = pytest.mark.compat  # tables shaped as delta-spark writes them

Row = tuple[Any, ...]
TABLE = "dv-partitioned"  # (part int, col1 int, col2 string)


@pytest.fixture
def root(foreign: Path, tmp_path: Path) -> str:
    copy = tmp_path / "t"
    shutil.copytree(foreign / TABLE, copy)
    return str(copy)


def live_descriptors(root: str) -> dict[str, dict]:
    """The ``deletionVector`` of each file of the table now that has one, by the log itself:
    the newest checkpoint's adds, then the JSON commits after it."""
    folder = Path(root) / "_delta_log"
    checkpoint = max(folder.glob("*.checkpoint.parquet"))
    since = int(checkpoint.name.split(".")[0])
    found: dict[str, dict] = {}
    for add in pq.read_table(checkpoint, columns=["add"]).column("add").to_pylist():
        if add is not None and add.get("deletionVector"):
            found[add["path"]] = add["deletionVector"]
    for version in range(since + 1, log.latest_version(root) + 1):
        actions = log.commit_actions(root, version) or []
        for remove in (a["remove"] for a in actions if "remove" in a):
            found.pop(remove["path"], None)  # a commit's removes, then its adds (same path)
        for add in (a["add"] for a in actions if "add" in a):
            found.pop(add["path"], None)
            if add.get("deletionVector"):
                found[add["path"]] = add["deletionVector"]
    return found


def _plain(descriptor: dict) -> dict:
    return {k: v for k, v in descriptor.items() if v is not None}


def _keys(rows: list[Row]) -> list[int]:
    return sorted(row[1] for row in rows)


SOURCE = pa.table(
    {
        "part": pa.array([6, 8, 1], pa.int32()),
        "col1": pa.array([46, 48, 71], pa.int32()),
        "col2": ["m6", "m8", "m1"],
    }
)
"""46 and 48 live in the files whose deletion vectors delete 26 and 28; 71 is new."""


def _merged(rows: list[Row]) -> list[Row]:
    updated = {46: (6, 46, "m6"), 48: (8, 48, "m8")}
    return [updated.get(row[1], row) for row in rows] + [(1, 71, "m1")]


CHANGES: dict[str, tuple[Callable[[str], Any], Callable[[list[Row]], list[Row]]]] = {
    "delete": (
        lambda root: operations.delete(root, "col1 = 46 OR col1 = 48"),
        lambda rows: [row for row in rows if row[1] not in (46, 48)],
    ),
    "update": (
        lambda root: operations.update(root, {"col2": "'u'"}, "col1 = 46 OR col1 = 48"),
        lambda rows: [(*row[:2], "u") if row[1] in (46, 48) else row for row in rows],
    ),
    "merge": (
        lambda root: merger.merge(
            root,
            SOURCE,
            "target.col1 = source.col1",
            [merger.Clause(merger.MATCHED_UPDATE_ALL), merger.Clause(merger.INSERT_ALL)],
        ),
        _merged,
    ),
    "merge delete": (
        lambda root: merger.merge(
            root, SOURCE, "target.col1 = source.col1", [merger.Clause(merger.MATCHED_DELETE)]
        ),
        lambda rows: [row for row in rows if row[1] not in (46, 48)],
    ),
    "delete all": (lambda root: operations.delete(root), lambda rows: []),
}


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_change_rewrites_files_without_their_deleted_rows(root: str, name: str) -> None:
    """DELETE, UPDATE and MERGE rewrite the files with deletion vectors (copy-on-write): no
    deleted row comes back, and each ``remove`` carries the file's deletion vector."""
    change, expect = CHANGES[name]
    before = expected(root)
    carrying = live_descriptors(root)
    assert carrying, "the made table has files with deletion vectors"
    version = log.latest_version(root)
    change(root)
    assert log.latest_version(root) == version + 1
    after = expected(root)
    assert _keys(after) == _keys(expect(before))
    assert sorted(after, key=repr) == sorted(expect(before), key=repr)
    assert _sorted(python_read(root)) == after
    removes = [a["remove"] for a in log.commit_actions(root, version + 1) or [] if "remove" in a]
    rewritten = [r for r in removes if r["path"] in carrying]
    assert rewritten, "the change rewrote a file with a deletion vector"
    for remove in rewritten:
        assert _plain(remove["deletionVector"]) == _plain(carrying[remove["path"]])


def test_optimize_and_restore_keep_the_deleted_rows_deleted(root: str) -> None:
    before = expected(root)
    operations.optimize(root)
    assert expected(root) == before
    operations.delete(root, "col1 = 46")
    operations.restore(root, log.latest_version(root) - 1)
    assert expected(root) == before


def test_vacuum_removes_the_deletion_vectors_no_file_needs(root: str) -> None:
    """delta-rs's VACUUM keeps every deletion vector file; lakefeed's removes those that no
    live file (nor a tombstone within the retention) names, and keeps the rest."""
    before = expected(root)
    operations.delete(root, "col1 = 46")  # a vector of lakefeed's among them
    live = {
        Path(dv.Descriptor.from_json(d).location(root))  # type: ignore[union-attr]
        for d in live_descriptors(root).values()
    }
    on_disk = set(Path(root).glob("deletion_vector_*.bin"))
    assert live < on_disk
    listed = tables.vacuum(root, 0, dry_run=True, force=True)
    assert {x for x in listed if "deletion_vector_" in x} == {p.name for p in on_disk - live}
    assert set(Path(root).glob("deletion_vector_*.bin")) == on_disk  # a dry run
    tables.vacuum(root, 0, dry_run=False, force=True)
    assert set(Path(root).glob("deletion_vector_*.bin")) == live
    assert expected(root) == [row for row in before if row[1] != 46]
    assert _sorted(python_read(root)) == expected(root)
    tables.vacuum(root, 24 * 7, dry_run=False)  # within the retention: nothing more goes
    assert set(Path(root).glob("deletion_vector_*.bin")) == live


def test_a_replayed_change_on_a_deletion_vector_table_is_skipped(root: str) -> None:
    txn = operations.Txn("app", 1)
    operations.delete(root, "col1 = 46", txn)
    version = log.latest_version(root)
    assert operations.delete(root, "col1 = 48", txn) is None
    assert log.latest_version(root) == version


def test_a_delete_on_a_column_mapped_table_with_deletion_vectors(
    foreign: Path, tmp_path: Path
) -> None:
    """Both features at once (delta-rs rewrites under column mapping): no deleted row comes
    back, and delta-rs's kernel and lakefeed's reader agree."""
    root = str(tmp_path / "t")
    shutil.copytree(foreign / "dv-column-mapping", root)
    before = expected(root)
    operations.delete(root, "col1 = 1 OR col1 = 46")
    after = expected(root)
    assert len(after) < len(before)
    assert _sorted(python_read(root)) == after


# -- DELETE writes deletion vectors where the table enables them -----------------------------


def _commit(root: str, version: int) -> tuple[list[dict], list[dict]]:
    actions = log.commit_actions(root, version) or []
    return [a["add"] for a in actions if "add" in a], [
        a["remove"] for a in actions if "remove" in a
    ]


def test_delete_marks_rows_in_deletion_vectors(root: str) -> None:
    """The made table has ``delta.enableDeletionVectors=true``: a DELETE adds the same files
    back with new deletion vectors (old and new rows, union), writes no data file, and delta-rs
    reads the vectors as lakefeed wrote them."""
    before, carrying = expected(root), live_descriptors(root)
    version = log.latest_version(root)
    data_files = set(Path(root).rglob("*.parquet")) - set(Path(root, "_delta_log").iterdir())
    metrics = operations.delete(root, "col1 = 46 OR col1 IN (31, 48) OR col2 IS NULL")
    assert metrics is not None and metrics["num_deleted_rows"] == 3
    assert expected(root) == [row for row in before if row[1] not in (31, 46, 48)]
    assert _sorted(python_read(root)) == expected(root)
    adds, removes = _commit(root, version + 1)
    assert sorted(a["path"] for a in adds) == sorted(r["path"] for r in removes)
    assert all(a["deletionVector"]["storageType"] == "u" for a in adds)
    for remove in removes:
        old = carrying.get(remove["path"])
        assert (_plain(remove["deletionVector"]) if old else remove.get("deletionVector")) == (
            _plain(old) if old else None
        )
    assert set(Path(root).rglob("*.parquet")) - set(Path(root, "_delta_log").iterdir()) == (
        data_files
    )
    by_rs = log.file_deletes(DeltaTable(root), root)
    for add in adds:
        mine = dv.positions(root, dv.Descriptor.from_json(add["deletionVector"]))
        assert (
            mine.tolist()
            == by_rs[dv.file_key(files.local_path(root, add["path"]))].array().tolist()
        )
        assert json.loads(add["stats"])["numRecords"] == len(
            pq.read_table(files.local_path(root, add["path"]))
        )
        if add["path"] in carrying:  # the old deleted rows stay deleted
            old = dv.positions(root, dv.Descriptor.from_json(carrying[add["path"]]))
            assert set(old.tolist()) < set(mine.tolist())


def test_a_file_whose_rows_are_all_deleted_is_removed(root: str) -> None:
    version = log.latest_version(root)
    operations.delete(root, "part = 6")
    adds, removes = _commit(root, version + 1)
    assert adds == [] and len(removes) == 1 and removes[0]["deletionVector"]
    assert all(row[0] != 6 for row in expected(root))


def test_a_predicate_arrow_cannot_evaluate_rewrites_files(root: str) -> None:
    """``LIKE`` is not evaluated on Arrow here: delta-rs rewrites the file instead, same rows."""
    before = expected(root)
    version = log.latest_version(root)
    operations.delete(root, "col2 LIKE 'row%' AND col1 = 46")
    adds, _ = _commit(root, version + 1)
    assert adds and all("deletionVector" not in a or a["deletionVector"] is None for a in adds)
    assert expected(root) == [row for row in before if row[1] != 46]


def test_without_the_property_delete_rewrites_files(tmp_path: Path) -> None:
    """The feature alone does not let writers add deletion vectors (PROTOCOL.md)."""
    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"id": list(range(10))}))
    DeltaTable(root).alter.add_feature(
        [TableFeatures.DeletionVectors], allow_protocol_versions_increase=True
    )
    operations.delete(root, "id < 3")
    adds, _ = _commit(root, log.latest_version(root))
    assert adds and not any(a.get("deletionVector") for a in adds)
    assert [row[0] for row in expected(root)] == list(range(3, 10))


def test_a_replayed_dv_delete_is_skipped(root: str) -> None:
    txn = operations.Txn("app", 7, offsets="abc")
    operations.delete(root, "col1 = 46", txn)
    version = log.latest_version(root)
    assert DeltaTable(root).transaction_version("app") == 7
    assert operations.delete(root, "col1 = 48", txn) is None
    assert log.latest_version(root) == version


def test_a_dv_delete_that_lost_the_race_to_a_delete_of_its_file_conflicts(root: str) -> None:
    """Two DELETEs of rows of one file: the later commit would drop the earlier's vector, so
    it fails (Delta's ConcurrentDeleteDelete); a blind append in between does not."""
    table = DeltaTable(root)
    version = table.version()
    live = log_writer.live_files(root, version)
    assert live is not None
    path = next(p for p in live if p.startswith("part=6/"))
    operations.delete(root, "col1 = 46")  # the winner
    with pytest.raises(ConflictError):
        log_writer.commit_actions(root, version, [{"commitInfo": {}}], {path}, None)
    write_deltalake(
        root,
        pa.table(
            {"part": pa.array([1], pa.int32()), "col1": pa.array([99], pa.int32()), "col2": ["x"]}
        ),
        mode="append",
    )
    blind = log.latest_version(root)
    assert (
        log_writer.commit_actions(root, blind - 1, [{"commitInfo": {}}], {path}, None) == blind + 1
    )


# -- tables lakefeed creates may turn deletion vectors on --------------------------------------


def _features(root: str) -> tuple[int, int, list[str], list[str]]:
    protocol = DeltaTable(root).protocol()
    return (
        protocol.min_reader_version,
        protocol.min_writer_version,
        sorted(protocol.reader_features or []),
        sorted(protocol.writer_features or []),
    )


def test_a_table_created_with_deletion_vectors_gets_them(tmp_path: Path) -> None:
    """``delta.enableDeletionVectors=true`` at creation: reader 3 / writer 7 with the feature
    (and not the ``variantType`` delta-rs would add), and its DELETEs write deletion vectors
    that delta-rs and lakefeed read alike."""
    root = str(tmp_path / "t")
    create.create(
        root,
        pa.schema([("id", pa.int64()), ("day", pa.string())]),
        partition_by=["day"],
        configuration={"delta.enableDeletionVectors": "true", "team": "x"},
    )
    assert _features(root) == (
        3,
        7,
        ["deletionVectors"],
        ["appendOnly", "deletionVectors", "invariants"],
    )
    assert DeltaTable(root).metadata().configuration == {
        "delta.enableDeletionVectors": "true",
        "team": "x",
    }
    write_deltalake(root, pa.table({"id": list(range(20)), "day": ["a", "b"] * 10}), mode="append")
    version = log.latest_version(root)
    operations.delete(root, "id < 5 OR id = 13")
    adds, _ = _commit(root, version + 1)
    assert len(adds) == 2 and all(a["deletionVector"] for a in adds)
    assert sorted(row[0] for row in expected(root)) == [i for i in range(5, 20) if i != 13]
    assert _sorted(python_read(root)) == expected(root)


def test_setting_properties_keeps_a_deletion_vector_table_s_protocol(
    foreign: Path, root: str
) -> None:
    """delta-rs's own property commit would add ``variantType`` to the made table."""
    before = _features(root)
    assert tables.describe(root, "a comment", {"team": "x", "delta.appendOnly": "false"})
    assert _features(root) == before
    configuration = DeltaTable(root).metadata().configuration
    assert configuration["team"] == "x" and configuration["delta.enableDeletionVectors"] == "true"
    assert expected(root) == expected(str(foreign / TABLE))


def test_turning_deletion_vectors_on_keeps_the_legacy_features(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"id": [1, 2, 3]}), configuration={"delta.appendOnly": "false"})
    tables.describe(root, None, {"delta.enableDeletionVectors": "true"})
    assert _features(root) == (
        3,
        7,
        ["deletionVectors"],
        ["appendOnly", "deletionVectors", "invariants"],
    )
    operations.delete(root, "id = 2")
    assert [row[0] for row in expected(root)] == [1, 3]
    assert pa.table(DeltaTable(root).deletion_vectors()).num_rows == 1


# -- Spark's write paths -----------------------------------------------------------------------


def test_spark_writes_into_a_deletion_vector_table(spark, root: str, tmp_path: Path) -> None:
    """``format("delta")`` append (both writers), ``writeStream`` and ``replaceWhere``: the
    files with deletion vectors keep them, a replaced partition loses its deleted rows with
    its files (its removes carry their vectors), and no deleted row comes back."""
    schema = "part int, col1 int, col2 string"
    before = expected(root)
    carrying = live_descriptors(root)
    new = spark.createDataFrame([(1, 101, "a")], schema)
    new.write.format("delta").mode("append").save(root)
    new.write.format("delta").mode("append").option("lakefeed.writer", "python").save(root)
    landing = tmp_path / "landing"
    spark.createDataFrame([(2, 102, "s")], schema).write.parquet(str(landing))
    stream = spark.readStream.schema(schema).parquet(str(landing)).writeStream.format("delta")
    query = stream.option("checkpointLocation", str(tmp_path / "cp")).start(root)
    query.processAllAvailable()
    query.stop()
    assert live_descriptors(root) == carrying  # appends leave the old files alone
    added = [(1, 101, "a"), (1, 101, "a"), (2, 102, "s")]
    assert expected(root) == sorted(before + added, key=repr)
    version = log.latest_version(root)
    replacement = spark.createDataFrame([(6, 106, "r")], schema)
    replacement.write.format("delta").mode("overwrite").option("replaceWhere", "part = 6").save(
        root
    )
    _, removes = _commit(root, version + 1)
    six = [r for r in removes if r["path"] in carrying and r["path"].startswith("part=6/")]
    assert six and all(_plain(r["deletionVector"]) == _plain(carrying[r["path"]]) for r in six)
    want = [row for row in before + added if row[0] != 6] + [(6, 106, "r")]
    assert expected(root) == sorted(want, key=repr)
    assert _sorted(python_read(root)) == expected(root)
    back = spark.read.format("delta").load(root).collect()
    assert sorted(map(tuple, back), key=repr) == expected(root)


def test_optimize_purges_the_deletion_vectors_of_files_alone_in_their_partition(
    root: str,
) -> None:
    """delta-rs compacts partitions with several files; the files with deletion vectors left
    alone are rewritten without their deleted rows (delta-spark: over 5% of the rows deleted),
    in a commit that changes no data."""
    before = expected(root)
    operations.optimize(root)
    assert live_descriptors(root) == {}
    version = log.latest_version(root)
    adds, removes = _commit(root, version)
    assert removes and all(r["deletionVector"] and r["dataChange"] is False for r in removes)
    assert adds and all(not a.get("deletionVector") and a["dataChange"] is False for a in adds)
    assert expected(root) == before
    assert _sorted(python_read(root)) == before
    assert pa.table(DeltaTable(root).deletion_vectors()).num_rows == 0


def test_optimize_purges_only_in_the_partitions_it_is_given(root: str) -> None:
    operations.optimize(root, partition_filters=[("part", "=", "6")])
    assert not any(path.startswith("part=6/") for path in live_descriptors(root))
    assert any(path.startswith("part=8/") for path in live_descriptors(root))


def test_update_marks_the_old_rows_and_writes_their_new_versions(root: str) -> None:
    """As delta-spark with deletion vectors: the updated rows are marked deleted in their files
    and written anew (here one moves to another partition)."""
    before = expected(root)
    version = log.latest_version(root)
    metrics = operations.update(root, {"col2": "'x'", "part": "9"}, "col1 IN (31, 46)")
    assert metrics is not None and metrics["num_updated_rows"] == 2
    adds, removes = _commit(root, version + 1)
    marked = [a for a in adds if a.get("deletionVector")]
    new = [a for a in adds if not a.get("deletionVector")]
    assert sorted(a["path"] for a in marked) == sorted(r["path"] for r in removes)
    assert len(marked) == 2 and new and all(a["path"].startswith("part=9/") for a in new)
    moved = {46: (9, 46, "x"), 31: (9, 31, "x")}
    want = sorted((moved.get(row[1], row) for row in before), key=repr)
    assert expected(root) == want
    assert _sorted(python_read(root)) == want


def test_update_of_a_table_with_a_check_constraint_marks_rows_and_checks_them(root: str) -> None:
    """As delta-spark: the UPDATE writes deletion vectors on a constrained table too, and a new
    row version that breaks the constraint fails it with Delta's error class and the row's
    values before anything is written."""
    operations.add_constraint(root, "positive", "col1 >= 0")
    version = log.latest_version(root)
    operations.update(root, {"col2": "'u'"}, "col1 = 46")
    adds, _ = _commit(root, version + 1)
    assert any(a.get("deletionVector") for a in adds)
    before, on_disk = expected(root), sorted(storage.files_under(root))
    with pytest.raises(Exception) as violated:
        operations.update(root, {"col1": "-1"}, "col1 = 48")
    assert code_of(violated.value) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert "positive" in str(violated.value) and "col1 : -1" in str(violated.value)
    assert log.latest_version(root) == version + 1 and expected(root) == before
    assert sorted(storage.files_under(root)) == on_disk


def test_a_dv_delete_reads_only_the_files_its_predicate_may_match(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition values and statistics rule files out before any is read."""
    read: list[str] = []
    original = files.read_file

    def counting(root_: str, file: log.DataFile, *args: Any) -> Any:
        read.append(file.path)
        return original(root_, file, *args)

    monkeypatch.setattr(files, "read_file", counting)
    operations.delete(root, "part = 6 AND col1 >= 40")
    assert read and all(path.startswith("part=6/") for path in read)
    assert all(row[1] != 46 for row in expected(root))


def test_vectors_survive_a_checkpoint_and_a_delete_planned_from_it(root: str) -> None:
    """delta-rs's checkpoint keeps the vectors lakefeed wrote; the next DELETE replays that
    checkpoint (the JSON commits before it are gone) and keeps the rows deleted before."""
    before = expected(root)
    operations.delete(root, "col1 = 46")
    DeltaTable(root).create_checkpoint()
    for commit in Path(root, "_delta_log").glob("*.json"):
        commit.unlink()
    operations.delete(root, "col1 = 36")
    assert expected(root) == [row for row in before if row[1] not in (36, 46)]
    assert _sorted(python_read(root)) == expected(root)
