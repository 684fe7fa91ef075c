"""MERGE writes deletion vectors on tables with ``delta.enableDeletionVectors=true``
(merge-on-read): matched rows it updates or deletes are marked in their files' vectors, new
and updated rows go into new files, and no file is rewritten.

Each MERGE runs twice, on a table with deletion vectors and on the same table without (where
delta-rs rewrites the files); both must read the same through delta-rs's kernel reader
(``QueryBuilder``, an independent reader) and through lakefeed's own reader.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from lakefeed.compat.delta_spark import DeltaTable as SparkDeltaTable
from lakefeed.connectors import delta
from lakefeed.core.errors import ConflictError
from lakefeed.delta import create, dv_merge, files, log, merger, operations, pruning
from lakefeed.delta.clauses import Clause
from lakefeed.delta.errors import MergeMultipleMatchesError
from lakefeed.delta.operations import Txn
from lakefeed.delta.schema import table_arrow_schema
from tests.delta.test_dv_concurrency import _retried, _wait_for

pytestmark = pytest.mark.compat  # MERGE INTO and the DeltaTable builder on the test session

M = merger
SCHEMA = pa.schema(
    [("id", pa.int64()), ("part", pa.string()), ("v", pa.string()), ("n", pa.int64())]
)
SOURCE = pa.table(
    {
        "id": [3, 15, 25, 40, None],
        "part": ["a", "b", "c", "x", "y"],
        "v": ["s3", "s15", "s25", "s40", "snull"],
        "n": [1, 2, 3, 4, 5],
    },
    schema=SCHEMA,
)


def make(root: str, deletion_vectors: bool, partitioned: bool = False) -> str:
    """Three appends of ten rows (ids 0..29, one null id), in three files or partitions."""
    create.create(
        root,
        SCHEMA,
        partition_by=["part"] if partitioned else [],
        configuration={"delta.enableDeletionVectors": str(deletion_vectors).lower()},
    )
    for k, part in enumerate("abc"):
        ids = [None if k == 2 and i == 9 else k * 10 + i for i in range(10)]
        rows = {"id": ids, "part": [part] * 10, "v": [f"{part}{i}" for i in range(10)]}
        write_deltalake(
            root, pa.table({**rows, "n": list(range(10))}, schema=SCHEMA), mode="append"
        )
    return root


def kernel_rows(root: str) -> list[tuple]:
    """The table's rows as delta-rs's DataFusion reader (with deletion vectors) returns them."""
    table = pa.table(QueryBuilder().register("t", DeltaTable(root)).execute("select * from t"))
    return _sorted(tuple(r.values()) for r in table.select(SCHEMA.names).to_pylist())


def lakefeed_rows(root: str) -> list[tuple]:
    """The table's rows through lakefeed's Python reader (each file minus its vector)."""
    table = log.open_table(root)
    schema = table_arrow_schema(table.schema())
    found = []
    for data in pruning.table_files(table, root):
        for batch in files.read_file(root, data, schema):
            found += batch.select(SCHEMA.names).to_pylist()
    return _sorted(tuple(r.values()) for r in found)


def _sorted(rows: Iterable[tuple]) -> list[tuple]:
    """Rows in order, nulls first in each column."""
    return sorted(rows, key=lambda row: [(v is not None, v if v is not None else 0) for v in row])


def last_commit(root: str) -> list[dict[str, Any]]:
    return log.commit_actions(root, log.latest_version(root)) or []


CASES: dict[str, tuple[str, list[Clause]]] = {
    "update and insert": (
        "t.id = s.id",
        [Clause(M.MATCHED_UPDATE_ALL), Clause(M.INSERT_ALL)],
    ),
    "conditional delete, update with values": (
        "t.id = s.id",
        [
            Clause(M.MATCHED_DELETE, "s.n = 2"),
            Clause(M.MATCHED_UPDATE, None, {"v": "s.v", "n": "t.n + s.n * 10"}),
            Clause(M.INSERT, "s.n > 3", {"id": "s.id", "v": "'new'"}),
        ],
    ),
    "null-safe keys": (
        "t.id <=> s.id AND t.part <> 'z'",
        [Clause(M.MATCHED_UPDATE, None, {"v": "'matched'"}), Clause(M.INSERT_ALL)],
    ),
    "not matched by source": (
        "t.id = s.id",
        [
            Clause(M.MATCHED_DELETE),
            Clause(M.BY_SOURCE_DELETE, "t.n >= 8"),
            Clause(M.BY_SOURCE_UPDATE, "t.n = 0", {"v": "'orphan'"}),
        ],
    ),
    "default aliases, backticks (as AUTO CDC writes them)": (
        "target.`id` = source.id AND target.n < 9",
        [Clause(M.MATCHED_UPDATE, None, {"`n`": "source.`n` + 100"}), Clause(M.INSERT_ALL)],
    ),
}


@pytest.mark.parametrize("partitioned", [False, True], ids=["plain", "partitioned"])
@pytest.mark.parametrize("case", list(CASES))
def test_merge_marks_rows_and_reads_as_a_copy_on_write_merge(
    tmp_path: Path, case: str, partitioned: bool
) -> None:
    condition, clauses = CASES[case]
    aliases = {} if "target." in condition else {"source_alias": "s", "target_alias": "t"}
    with_dv = make(str(tmp_path / "dv"), True, partitioned)
    without = make(str(tmp_path / "cow"), False, partitioned)
    metrics = merger.merge(with_dv, SOURCE, condition, clauses, **aliases)
    expected = merger.merge(without, SOURCE, condition, clauses, **aliases)

    assert kernel_rows(with_dv) == kernel_rows(without)
    assert lakefeed_rows(with_dv) == kernel_rows(without)
    assert metrics is not None and expected is not None
    for key in ("num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted"):
        assert metrics[key] == expected[key], key
    actions = last_commit(with_dv)
    removed = {a["remove"]["path"] for a in actions if "remove" in a}
    re_added = {a["add"]["path"] for a in actions if "add" in a and a["add"].get("deletionVector")}
    assert removed and removed <= re_added | _emptied(actions)  # marked, not rewritten
    assert metrics["num_target_rows_copied"] == 0


def _emptied(actions: list[dict[str, Any]]) -> set[str]:
    """Files the commit removes without adding back (all their rows deleted)."""
    added = {a["add"]["path"] for a in actions if "add" in a}
    return {a["remove"]["path"] for a in actions if "remove" in a} - added


def test_a_merge_after_a_merge_keeps_the_rows_deleted_before(tmp_path: Path) -> None:
    """Vectors accumulate: a row deleted by the first MERGE stays deleted after the second
    marks other rows of the same file."""
    root = make(str(tmp_path / "t"), True)
    on, delete = "t.id = s.id", [Clause(M.MATCHED_DELETE)]
    merger.merge(root, SOURCE.slice(0, 1), on, delete, source_alias="s", target_alias="t")
    merger.merge(root, SOURCE.slice(1, 1), on, delete, source_alias="s", target_alias="t")
    ids = [row[0] for row in kernel_rows(root)]
    assert 3 not in ids and 15 not in ids and len(ids) == 28
    assert lakefeed_rows(root) == kernel_rows(root)


def test_what_arrow_cannot_evaluate_is_left_to_delta_rs(tmp_path: Path) -> None:
    """No equality between the sides (or a function): delta-rs's MERGE rewrites the files,
    with the same rows as result."""
    with_dv = make(str(tmp_path / "dv"), True)
    without = make(str(tmp_path / "cow"), False)
    clauses = [Clause(M.MATCHED_UPDATE, None, {"v": "concat(s.v, '!')"})]
    for root in (with_dv, without):
        merger.merge(root, SOURCE, "t.id = s.id", clauses, source_alias="s", target_alias="t")
    assert kernel_rows(with_dv) == kernel_rows(without)
    assert not any(a.get("add", {}).get("deletionVector") for a in last_commit(with_dv))


def test_several_source_rows_on_one_target_row_fail_before_writing(tmp_path: Path) -> None:
    root = make(str(tmp_path / "t"), True)
    twice = pa.concat_tables([SOURCE.slice(0, 1), SOURCE.slice(0, 1)])
    before = log.latest_version(root)
    with pytest.raises(MergeMultipleMatchesError):
        merger.merge(
            root,
            twice,
            "t.id = s.id",
            [Clause(M.MATCHED_UPDATE_ALL)],
            source_alias="s",
            target_alias="t",
        )
    assert log.latest_version(root) == before
    # one unconditional delete may match a row several times (delta-spark): it deletes it once
    merger.merge(
        root, twice, "t.id = s.id", [Clause(M.MATCHED_DELETE)], source_alias="s", target_alias="t"
    )
    assert 3 not in [row[0] for row in kernel_rows(root)]


def test_a_replayed_merge_is_skipped(tmp_path: Path) -> None:
    root = make(str(tmp_path / "t"), True)
    clauses = [Clause(M.MATCHED_DELETE), Clause(M.INSERT_ALL)]
    first = merger.merge(
        root, SOURCE, "t.id = s.id", clauses, source_alias="s", target_alias="t", txn=Txn("app", 1)
    )
    rows = kernel_rows(root)
    again = merger.merge(
        root, SOURCE, "t.id = s.id", clauses, source_alias="s", target_alias="t", txn=Txn("app", 1)
    )
    assert first is not None and again is None and kernel_rows(root) == rows
    assert DeltaTable(root).transaction_version("app") == 1


def _planned_then(root: str, concurrent) -> dict[str, Any] | None:
    """A MERGE planned on the table as it is, committed after ``concurrent`` committed."""
    table = log.open_table(root)
    concurrent()
    sides = dv_merge.Sides("t", "s")
    return dv_merge.merge(
        table, root, SOURCE, "t.id = s.id", [Clause(M.MATCHED_DELETE)], sides, None
    )


def test_a_blind_append_during_a_merge_keeps_both(tmp_path: Path) -> None:
    root = make(str(tmp_path / "t"), True)
    more = pa.table(
        {"id": [3, 100], "part": ["d", "d"], "v": ["late", "late"], "n": [0, 0]}, SCHEMA
    )
    assert _planned_then(root, lambda: write_deltalake(root, more, mode="append")) is not None
    ids = [row[0] for row in kernel_rows(root)]
    # WriteSerializable: the append counts as after the MERGE; its row 3 stays
    assert ids.count(3) == 1 and 100 in ids and 15 not in ids and 25 not in ids


def test_a_concurrent_delete_of_the_same_file_fails_the_merge(tmp_path: Path) -> None:
    """Two changes marking one file: the later one must not commit a vector missing the
    earlier one's rows (that would bring them back)."""
    root = make(str(tmp_path / "t"), True)
    with pytest.raises(ConflictError):
        _planned_then(root, lambda: operations.delete(root, "id = 4"))
    ids = [row[0] for row in kernel_rows(root)]
    assert 4 not in ids and 3 in ids  # the delete held; the MERGE wrote nothing
    merger.merge(
        root, SOURCE, "t.id = s.id", [Clause(M.MATCHED_DELETE)], source_alias="s", target_alias="t"
    )
    ids = [row[0] for row in kernel_rows(root)]
    assert 4 not in ids and 3 not in ids  # retried on the new version: both deletes hold


def test_merge_paths_of_the_compat_surfaces_write_vectors(spark, tmp_path: Path) -> None:
    """``DeltaTable.merge`` (the delta-spark builder) and SQL ``MERGE INTO`` go through it."""
    root = make(str(tmp_path / "t"), True)
    source = spark.createDataFrame(
        [(3, "a", "b3", 7), (50, "e", "new", 1)], "id long, part string, v string, n long"
    )
    (
        SparkDeltaTable.forPath(spark, root)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    assert any(a.get("add", {}).get("deletionVector") for a in last_commit(root))
    source.createOrReplaceTempView("updates")
    spark.sql(
        f"MERGE INTO delta.`{root}` AS t USING updates AS s ON t.id = s.id "
        "WHEN MATCHED AND s.id = 50 THEN DELETE"
    )
    assert any(a.get("add", {}).get("deletionVector") for a in last_commit(root))
    rows = kernel_rows(root)
    assert (3, "a", "b3", 7) in rows and 50 not in [r[0] for r in rows]
    assert _sorted(tuple(r) for r in spark.read.format("delta").load(root).collect()) == rows


def test_a_stream_appends_while_merges_delete(spark, tmp_path: Path) -> None:
    """A stream appending while MERGEs mark rows: no delete lost, no deleted row back, no
    appended row lost or doubled; the MERGEs wrote deletion vectors."""
    root = make(str(tmp_path / "t"), True)
    rows = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
    query = delta.write_stream(
        rows.selectExpr("value + 1000 AS id", "'s' AS part", "'stream' AS v", "0L AS n"),
        root,
        str(tmp_path / "cp"),
        trigger={"processingTime": "200 milliseconds"},
    )
    gone: set[int] = set()
    try:
        _wait_for(root, log.latest_version(root) + 3, query)
        for step in range(6):
            ids = [step * 4 + k for k in range(3)]
            source = pa.table({"id": ids, "part": ["x"] * 3, "v": ["x"] * 3, "n": [0] * 3}, SCHEMA)
            _retried(
                lambda s=source: merger.merge(
                    root,
                    s,
                    "t.id = s.id",
                    [Clause(M.MATCHED_DELETE)],
                    source_alias="s",
                    target_alias="t",
                )
            )
            assert any(a.get("add", {}).get("deletionVector") for a in _merge_commit(root))
            gone |= set(ids)
        _wait_for(root, log.latest_version(root) + 2, query)
    finally:
        query.stop()
    now = kernel_rows(root)
    seeds = sorted(r[0] for r in now if r[2] != "stream" and r[0] is not None)
    streamed = sorted(r[0] - 1000 for r in now if r[2] == "stream")
    assert seeds == [i for i in range(29) if i not in gone]
    assert streamed == list(range(len(streamed))) and streamed
    assert lakefeed_rows(root) == now


def _merge_commit(root: str) -> list[dict[str, Any]]:
    """The newest MERGE commit's actions."""
    for version in range(log.latest_version(root), -1, -1):
        actions = log.commit_actions(root, version) or []
        if any(a.get("commitInfo", {}).get("operation") == "MERGE" for a in actions):
            return actions
    return []


def test_an_auto_cdc_shaped_merge_marks_rows(tmp_path: Path) -> None:
    """The clauses AUTO CDC's target MERGE writes (lakefeed/cdc/apply.py): backticked names,
    ``<=>`` keys, an action column only the source has."""
    changes = SOURCE.append_column(
        "__action", pa.array(["DELETE", "UPSERT", "UPSERT", "UPSERT", "DELETE"])
    )
    values = {f"`{c}`": f"source.`{c}`" for c in SCHEMA.names}
    clauses = [
        Clause(M.MATCHED_DELETE, "source.`__action` = 'DELETE'"),
        Clause(M.MATCHED_UPDATE, values=values),
        Clause(M.INSERT, "source.`__action` = 'UPSERT'", values),
    ]
    condition = "target.`id` <=> source.`id`"
    with_dv = make(str(tmp_path / "dv"), True)
    without = make(str(tmp_path / "cow"), False)
    for root in (with_dv, without):
        merger.merge(root, changes, condition, clauses)
    assert kernel_rows(with_dv) == kernel_rows(without)
    assert any(a.get("add", {}).get("deletionVector") for a in last_commit(with_dv))
    ids = [row[0] for row in kernel_rows(with_dv)]
    assert 3 not in ids and 40 in ids and None not in ids  # <=>: the null key matched, deleted
