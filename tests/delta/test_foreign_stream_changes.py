"""A stream whose source table changes under it, as delta-spark and Databricks change tables:
deletion vectors turned on and a DELETE writing them, a column renamed or dropped under column
mapping. The stream continues as delta-spark's source does (``skipChangeCommits`` skips the
DELETE, ``ignoreChanges`` re-reads the touched file without its deleted rows) or stops with a
coded error (a DELETE without options or under ``ignoreDeletes``: its commit re-adds a file; a
rename or drop: ``DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE``, delta-spark's
``..._USE_SCHEMA_LOG`` without a schema tracking location). It never emits a deleted row, nor a
row under the wrong column. The tables are made by :class:`tests.delta.foreign.TableMaker`.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakefeed.connectors.delta.errors import INCOMPATIBLE_SCHEMA
from tests.delta.foreign import TableMaker
from tests.delta.test_foreign_read_paths import _collect_stream
from tests.delta.test_foreign_tables import _sorted

pytestmark = pytest.mark.compat  # readStream.format("delta") on the test session

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _rows(ids: range) -> pa.Table:
    return pa.table({"id": list(ids), "name": [f"n{i}" for i in ids]}, SCHEMA)


def _table(root: Path, mode: str | None) -> tuple[TableMaker, list[dict]]:
    """Two files of four rows (ids 0-3 and 10-13); the adds."""
    versions = (2, 5) if mode else (1, 2)
    maker = TableMaker(root, SCHEMA, versions=versions, mode=mode, seed=100)
    return maker, maker.create([_rows(range(4)), _rows(range(10, 14))])


def _turn_on_deletion_vectors(maker: TableMaker) -> None:
    """``ALTER TABLE SET TBLPROPERTIES (delta.enableDeletionVectors = true)``: the protocol
    goes to reader 3 / writer 7 with the feature (column mapping kept)."""
    features = ["deletionVectors"] + (["columnMapping"] if maker.mode else [])
    maker.versions = (3, 7)
    maker.reader_features = maker.writer_features = features
    maker.configuration["delta.enableDeletionVectors"] = "true"
    actions = [{"protocol": maker.protocol()}, {"metaData": maker.metadata()}]
    maker.commit("SET TBLPROPERTIES", actions)


def _stream(spark, root: Path, checkpoint: Path, reader: str, **options: str) -> list[tuple]:  # noqa: ANN001
    frame = spark.readStream.format("delta").option("lakefeed.reader", reader).options(**options)
    return _collect_stream(frame.load(str(root)), checkpoint)


READERS = ["spark", "python"]
FIRST = _sorted(pa.concat_tables([_rows(range(4)), _rows(range(10, 14))]))


@pytest.mark.parametrize("mode", [None, "name"])
@pytest.mark.parametrize("reader", READERS)
def test_deletion_vectors_turned_on_while_a_stream_runs(
    spark,  # noqa: ANN001
    tmp_path: Path,
    reader: str,
    mode: str | None,
) -> None:
    """The stream started before the table had deletion vectors; then they are turned on, a
    DELETE marks ids 1 and 2 in the first file, and ids 20-21 are appended."""
    root = tmp_path / "t"
    maker, adds = _table(root, mode)
    runs = {opt: tmp_path / f"cp-{opt}" for opt in ("none", "deletes", "skip", "changes")}
    options = {
        "none": {},
        "deletes": {"ignoreDeletes": "true"},
        "skip": {"skipChangeCommits": "true"},
        "changes": {"ignoreChanges": "true"},
    }
    for name, checkpoint in runs.items():
        assert _stream(spark, root, checkpoint, reader, **options[name]) == FIRST
    _turn_on_deletion_vectors(maker)
    maker.delete({adds[0]["path"]: {1, 2}})
    maker.append(_rows(range(20, 22)))
    for name in ("none", "deletes"):  # the DELETE re-adds its file: a change
        with pytest.raises(Exception, match="DELTA_SOURCE[\\s\\S]*ignoreChanges"):
            _stream(spark, root, runs[name], reader, **options[name])
    appended = _sorted(_rows(range(20, 22)))
    assert _stream(spark, root, runs["skip"], reader, **options["skip"]) == appended
    changed = _stream(spark, root, runs["changes"], reader, **options["changes"])
    assert changed == sorted([(0, "n0"), (3, "n3"), *appended], key=repr)


def _rename(maker: TableMaker, old: str, new: str) -> None:
    """``ALTER TABLE RENAME COLUMN``: a metadata commit, the physical name kept."""
    (field,) = [f for f in maker.fields if f["name"] == old]
    field["name"] = new
    maker.commit("RENAME COLUMN", [{"metaData": maker.metadata()}])


def _drop(maker: TableMaker, name: str) -> None:
    maker.fields = [f for f in maker.fields if f["name"] != name]
    maker.commit("DROP COLUMNS", [{"metaData": maker.metadata()}])


@pytest.mark.parametrize("change", ["rename", "drop"])
@pytest.mark.parametrize("reader", READERS)
def test_a_column_renamed_or_dropped_under_column_mapping_stops_the_stream(
    spark,  # noqa: ANN001
    tmp_path: Path,
    reader: str,
    change: str,
) -> None:
    """After the change, rows are appended: the stream stops with the code before any of them
    is emitted (under the old name they would be the wrong column, or a dropped one's)."""
    root = tmp_path / "t"
    maker, _ = _table(root, "name")
    checkpoint = tmp_path / "cp"
    assert _stream(spark, root, checkpoint, reader) == FIRST
    if change == "rename":
        _rename(maker, "name", "label")
    else:
        _drop(maker, "name")
    maker.append(_rows(range(20, 22)))
    emitted: list[tuple] = []
    with pytest.raises(Exception, match=rf"{INCOMPATIBLE_SCHEMA}[\s\S]*'name'"):
        emitted = _stream(spark, root, checkpoint, reader)
    assert emitted == []
