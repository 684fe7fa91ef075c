"""Deletion-vector DML and OPTIMIZE on the tables delta-spark and Databricks make (issue 33):
column-mapped tables (``name`` and ``id``, made as delta-spark writes them by
:mod:`tests.delta.foreign`) and tables with CHECK constraints or NOT NULL columns. MERGE,
UPDATE and DELETE write deletion vectors there (they fell back to delta-rs's copy-on-write
before); OPTIMIZE compacts column-mapped tables with lakefeed's own commit (delta-rs refuses
it) and purges their vectors. Rows are checked against delta-rs's kernel reader
(``QueryBuilder``) and lakefeed's reader. Spark-free."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.core import storage
from lakefeed.core.errors import ConflictError, code_of
from lakefeed.delta import (
    constraints,
    create,
    dv_write,
    files,
    log,
    mapping,
    merger,
    operations,
    rewrite,
)
from lakefeed.delta import table as tables
from lakefeed.delta.clauses import Clause
from lakefeed.runtime import compaction
from tests.delta.foreign import make_dv_table, make_mapped_table
from tests.delta.test_column_mapping_writes import _check_files
from tests.delta.test_dv_merge import SCHEMA, SOURCE, make
from tests.delta.test_dv_writes import live_descriptors
from tests.delta.test_foreign_tables import _sorted, expected, python_read

M = merger
MAPPED_SOURCE = pa.table(
    {
        "part": pa.array([1, 2, 6, 3, 7], pa.int32()),
        "col1": pa.array([1, 12, 26, 33, 77], pa.int32()),
        "col2": ["s1", "s12", "s26", "s33", "s77"],
    }
)
"""Keys of the DV table (col1 1 and 12 live, 26 deleted, 33 live, 77 new)."""
MAPPED_CLAUSES = [
    Clause(M.MATCHED_DELETE, "s.col1 = 33"),
    Clause(M.MATCHED_UPDATE, None, {"col2": "s.col2", "part": "t.part"}),
    Clause(M.INSERT_ALL),
    Clause(M.BY_SOURCE_UPDATE, "t.col1 >= 45", {"col2": "'orphan'"}),
]


def _made(tmp_path: Path, name: str, mode: str) -> str:
    root = tmp_path / name
    make_dv_table(root, mode)
    return str(root)


def _actions(root: str, version: int) -> list[dict[str, Any]]:
    return log.commit_actions(root, version) or []


@pytest.mark.parametrize("mode", ["name", "id"])
def test_merge_writes_vectors_on_a_column_mapped_table(tmp_path: Path, mode: str) -> None:
    """The MERGE marks rows, writes physical names and field ids, and reads back as delta-rs's
    copy-on-write MERGE of the same table."""
    with_dv, cow = _made(tmp_path, "dv", mode), _made(tmp_path, "cow", mode)
    version = log.latest_version(with_dv)
    aliases = {"source_alias": "s", "target_alias": "t"}
    metrics = merger.merge(with_dv, MAPPED_SOURCE, "t.col1 = s.col1", MAPPED_CLAUSES, **aliases)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dv_write, "applies", lambda table, root: False)
        wanted = merger.merge(cow, MAPPED_SOURCE, "t.col1 = s.col1", MAPPED_CLAUSES, **aliases)

    assert expected(with_dv) == expected(cow)
    assert _sorted(python_read(with_dv)) == expected(cow)
    assert metrics is not None and wanted is not None
    for key in ("num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted"):
        assert metrics[key] == wanted[key], key
    actions = _actions(with_dv, version + 1)
    assert any(a["add"].get("deletionVector") for a in actions if "add" in a)
    assert _check_files(with_dv, version) > 0  # physical names, field ids, stats by them


@pytest.mark.parametrize("mode", ["name", "id"])
def test_delete_and_update_write_vectors_on_a_column_mapped_table(
    tmp_path: Path, mode: str
) -> None:
    root = _made(tmp_path, "t", mode)
    version = log.latest_version(root)
    operations.delete(root, "col1 = 1 OR col1 = 46")
    operations.update(root, {"col2": "'u'"}, "col1 = 12")
    for done in (version + 1, version + 2):
        assert any(a["add"].get("deletionVector") for a in _actions(root, done) if "add" in a)
    rows = expected(root)
    assert not [r for r in rows if r[1] in (1, 46)] and (2, 12, "u") in rows
    assert _sorted(python_read(root)) == rows
    _check_files(root, version)


def test_change_data_files_of_a_column_mapped_table_store_physical_names(tmp_path: Path) -> None:
    """With the change data feed on, the ``_change_data`` files store physical names and
    field ids (as delta-spark's and delta-rs's do), partition values keyed by physical name."""
    root = _made(tmp_path, "t", "id")
    tables.describe(root, None, {dv_write.CHANGE_FEED: "true"})
    version = log.latest_version(root)
    operations.update(root, {"col2": "'u'"}, "col1 = 12")
    actions = _actions(root, version + 1)
    assert any(a["add"].get("deletionVector") for a in actions if "add" in a)
    columns = log.table_mapping(log.open_table(root))
    physical = {c.physical: c for c in columns.columns}
    cdc = [a["cdc"] for a in actions if "cdc" in a]
    assert cdc and all(set(c["partitionValues"]) <= set(physical) for c in cdc)
    changes = []
    for change in cdc:
        data = pq.read_table(files.local_path(root, change["path"]))
        for field in data.schema:
            if field.name != dv_write.CHANGE_TYPE:
                ident = str(physical[field.name].id).encode()
                assert field.metadata[mapping.FIELD_ID] == ident
        logical = columns.logical_partition_values(change["partitionValues"])
        for row in data.to_pylist():
            named = {physical[k].name if k in physical else k: v for k, v in row.items()}
            changes.append(
                (int(logical["part"]), named["col1"], named["col2"], named["_change_type"])
            )
    assert sorted(changes) == [
        (2, 12, "row12", "update_preimage"),
        (2, 12, "u", "update_postimage"),
    ]
    assert (2, 12, "u") in expected(root) and _sorted(python_read(root)) == expected(root)


def _constrained(root: str) -> str:
    """test_dv_merge's table with deletion vectors, a CHECK constraint and an invariant."""
    make(root, True)
    operations.add_constraint(root, "small_n", "n < 100")
    return root


def test_merge_on_a_constrained_table_writes_vectors_and_checks_the_new_rows(
    tmp_path: Path,
) -> None:
    root = _constrained(str(tmp_path / "t"))
    version = log.latest_version(root)
    clauses = [Clause(M.MATCHED_UPDATE_ALL), Clause(M.INSERT_ALL)]
    merger.merge(root, SOURCE, "t.id = s.id", clauses, source_alias="s", target_alias="t")
    assert any(a["add"].get("deletionVector") for a in _actions(root, version + 1) if "add" in a)

    before, on_disk = expected(root), sorted(storage.files_under(root))
    breaking = pa.table({**SOURCE.to_pydict(), "n": [1, 2, 300, 4, 5]}, schema=SCHEMA)
    with pytest.raises(Exception) as violated:
        merger.merge(root, breaking, "t.id = s.id", clauses, source_alias="s", target_alias="t")
    assert code_of(violated.value) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert "CHECK constraint small_n (n < 100) violated by row with values" in str(violated.value)
    assert "n : 300" in str(violated.value)
    assert log.latest_version(root) == version + 1 and expected(root) == before
    assert sorted(storage.files_under(root)) == on_disk


def test_merge_into_a_not_null_column_fails_before_writing(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    create.create(root, schema, configuration={dv_write.ENABLE: "true"})
    rows = pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=schema)
    write_deltalake(root, rows, mode="append")
    version = log.latest_version(root)
    source = pa.table({"key": [2, 9], "id": [2, None], "v": ["B", "new"]})
    clauses = [Clause(M.MATCHED_UPDATE, None, {"v": "s.v"}), Clause(M.INSERT_ALL)]
    with pytest.raises(Exception) as violated:
        merger.merge(root, source, "t.id = s.key", clauses, source_alias="s", target_alias="t")
    assert code_of(violated.value) == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    assert log.latest_version(root) == version
    clauses = [Clause(M.MATCHED_UPDATE, None, {"v": "s.v"})]
    merger.merge(root, source, "t.id = s.key", clauses, source_alias="s", target_alias="t")
    assert any(a["add"].get("deletionVector") for a in _actions(root, version + 1) if "add" in a)
    assert expected(root) == [(1, "a"), (2, "B"), (3, "c")]


def test_not_null_fields_of_structs_are_checked_where_the_struct_is_present() -> None:
    inner = pa.struct([pa.field("x", pa.int64(), nullable=False)])
    schema = pa.schema([pa.field("s", inner)])
    constraints.check_rows(pa.table({"s": [{"x": 1}, None]}, schema=schema), schema, (), "/t")
    with pytest.raises(Exception) as violated:
        constraints.check_rows(pa.table({"s": [{"x": 1}, {"x": None}]}, schema), schema, (), "/t")
    assert code_of(violated.value) == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    assert "column: s.x." in str(violated.value)


@pytest.mark.parametrize("mode", ["name", "id"])
def test_optimize_compacts_a_column_mapped_table_and_purges_its_vectors(
    tmp_path: Path, mode: str
) -> None:
    root = _made(tmp_path, "t", mode)
    before, version = expected(root), log.latest_version(root)
    assert live_descriptors(root)
    metrics = operations.optimize(root)

    assert metrics is not None and metrics["numFilesRemoved"] > metrics["numFilesAdded"] > 0
    assert live_descriptors(root) == {}
    actions = _actions(root, version + 1)
    changes = [a.get("add") or a.get("remove") for a in actions if "add" in a or "remove" in a]
    assert changes and all(c["dataChange"] is False for c in changes)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE"
    assert expected(root) == before
    assert _sorted(python_read(root)) == before
    _check_files(root, version)
    adds = [a["add"] for a in actions if "add" in a]
    assert len({json.dumps(a["partitionValues"]) for a in adds}) == len(adds)  # one per partition


def test_optimize_keeps_nested_physical_names_and_field_ids(tmp_path: Path) -> None:
    root = tmp_path / "t"
    make_mapped_table(root, "id")
    before, version = expected(root), log.latest_version(str(root))
    operations.optimize(str(root), partition_filters=None)
    assert log.latest_version(str(root)) == version + 1
    assert expected(root) == before
    assert _sorted(python_read(str(root))) == before
    assert len(DeltaTable(str(root)).file_uris()) == 1
    _check_files(str(root), version)


def test_a_delete_during_a_compaction_fails_it_and_holds(tmp_path: Path) -> None:
    """The compaction planned before a concurrent DELETE marked one of its files must not
    commit that file's rows without the new vector (that would bring the row back)."""
    root = _made(tmp_path, "t", "name")
    table = log.open_table(root)
    operations.delete(root, "col1 = 12")
    with pytest.raises(ConflictError):
        rewrite.compact(table, root, None, None)
    assert not [row for row in expected(root) if row[1] == 12]
    assert operations.optimize(root) is not None
    assert not [row for row in expected(root) if row[1] == 12]
    assert _sorted(python_read(root)) == expected(root)


def test_auto_compaction_compacts_a_column_mapped_table(tmp_path: Path) -> None:
    root = _made(tmp_path, "t", "id")
    tables.describe(root, None, {"delta.autoOptimize.autoCompact": "true"})
    before, version = expected(root), log.latest_version(root)
    files_before = len(DeltaTable(root).file_uris())
    assert compaction.compact_if_needed(root, compaction.Policy(min_files=2)) > 0
    assert len(DeltaTable(root).file_uris()) < files_before
    assert expected(root) == before and _sorted(python_read(root)) == before
    _check_files(root, version)


def test_z_order_of_a_column_mapped_table_is_refused_before_writing(tmp_path: Path) -> None:
    root = _made(tmp_path, "t", "name")
    version = log.latest_version(root)
    with pytest.raises(Exception) as refused:
        operations.optimize(root, z_order=["col1"])
    assert code_of(refused.value) == "DELTA_UNSUPPORTED_BY_LAKEFEED"
    assert log.latest_version(root) == version


def test_id_mode_cannot_be_turned_on_for_an_existing_table(tmp_path: Path) -> None:
    """delta-spark allows only ``none`` -> ``name`` on an existing table (``id`` is set when
    the table is created): ``DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE``, nothing
    committed."""
    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"id": [1, 2]}))
    with pytest.raises(Exception) as refused:
        tables.describe(root, None, {"delta.columnMapping.mode": "id"})
    assert code_of(refused.value) == "DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE"
    assert log.latest_version(root) == 0
    assert tables.describe(root, None, {"delta.columnMapping.mode": "name"})
    assert log.table_mapping(log.open_table(root)).mode == "name"
