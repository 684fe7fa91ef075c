"""Writes into tables with deletion vectors (Delta's golden ``dv-partitioned-with-checkpoint``,
written by delta-spark): every write path honours the rows the table's deletion vectors delete.

The expected rows are the table's rows before the write as delta-rs's kernel reader
(``QueryBuilder``) returns them, changed in Python; the result must read the same through
QueryBuilder and through lakefeed's reader. A rewritten file's ``remove`` must carry the
file's ``deletionVector`` (PROTOCOL.md: a logical file is its path and its DV's ``uniqueId``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefeed.core.errors import code_of
from lakefeed.delta import log, merger, operations
from lakefeed.delta import table as tables
from tests.delta.test_golden import GOLDEN, _sorted, expected, python_read

pytestmark = pytest.mark.compat  # Delta's own tables

Row = tuple[Any, ...]
TABLE = "dv-partitioned-with-checkpoint"  # (part int, col1 int, col2 string)


@pytest.fixture
def root(tmp_path: Path) -> str:
    copy = tmp_path / "t"
    shutil.copytree(GOLDEN / TABLE, copy)
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
    assert carrying, "the golden table has files with deletion vectors"
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


def test_vacuum_keeps_the_deletion_vectors_live_files_use(root: str) -> None:
    before = expected(root)
    tables.vacuum(root, 0, dry_run=False, force=True)
    assert expected(root) == before
    assert _sorted(python_read(root)) == before
    for descriptor in live_descriptors(root).values():
        assert descriptor["storageType"] == "u"


def test_a_replayed_change_on_a_deletion_vector_table_is_skipped(root: str) -> None:
    txn = operations.Txn("app", 1)
    operations.delete(root, "col1 = 46", txn)
    version = log.latest_version(root)
    assert operations.delete(root, "col1 = 48", txn) is None
    assert log.latest_version(root) == version


def test_column_mapping_with_deletion_vectors_is_still_refused(tmp_path: Path) -> None:
    """Only deletion vectors are kept right here; column mapping is judged on its own."""
    root = tmp_path / "t"
    shutil.copytree(GOLDEN / "dv-with-columnmapping", root)
    with pytest.raises(Exception) as refused:
        operations.delete(str(root), "col1 = 1")
    assert code_of(refused.value) == "DELTA_UNSUPPORTED_READER_FEATURE"
    assert "columnMapping" in str(refused.value)
