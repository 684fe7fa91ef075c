"""Issue 33: UPDATE and MERGE on tables with generated columns recompute the columns of the
rows they write (as delta-spark does), refuse a set value that disagrees with the expression
and check CHECK constraints, all before anything is written."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import QueryBuilder

from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.core.errors import code_of

pytestmark = pytest.mark.compat  # the delta-spark look-alike runs the changes

UTC = dt.UTC


def _table(spark, path: str, deletion_vectors: bool = True) -> DeltaTable:
    builder = (
        DeltaTable.create(spark)
        .location(path)
        .addColumn("id", "BIGINT")
        .addColumn("eventTime", "TIMESTAMP")
        .addColumn("eventDate", "DATE", generatedAlwaysAs="CAST(eventTime AS DATE)")
    )
    if deletion_vectors:
        builder = builder.property("delta.enableDeletionVectors", "true")
    builder.execute()
    rows = spark.createDataFrame(
        [(1, dt.datetime(2020, 1, 1, 5, tzinfo=UTC)), (2, dt.datetime(2021, 6, 1, 5, tzinfo=UTC))],
        "id bigint, eventTime timestamp",
    )
    rows.write.format("delta").mode("append").save(path)
    return DeltaTable.forPath(spark, path)


def _rows(path: str) -> dict[int, tuple]:
    """Each row's date of ``eventTime`` and its ``eventDate``, read by delta-rs's kernel
    reader (deletion vectors applied)."""
    query = QueryBuilder().register("t", RsTable(path))
    rows = pa.table(query.execute("SELECT * FROM t")).to_pylist()
    return {
        r["id"]: (r["eventTime"].date() if r["eventTime"] else None, r["eventDate"]) for r in rows
    }


def _code(change) -> str | None:  # noqa: ANN001
    with pytest.raises(Exception) as error:
        change()
    return code_of(error.value)


def test_update_recomputes_and_checks_generated_columns(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = _table(spark, path)
    table.update("id = 1", {"eventTime": "'2022-03-04T10:00:00Z'"})
    assert _rows(path)[1] == (dt.date(2022, 3, 4), dt.date(2022, 3, 4))
    assert _rows(path)[2] == (dt.date(2021, 6, 1), dt.date(2021, 6, 1))
    version = RsTable(path).version()
    wrong = {"eventDate": "'1999-01-01'"}
    assert _code(lambda: table.update("id = 2", wrong)) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert RsTable(path).version() == version
    table.update("id = 2", {"eventDate": "'2021-06-01'"})  # agrees with the expression: kept
    assert _rows(path)[2] == (dt.date(2021, 6, 1), dt.date(2021, 6, 1))


def test_merge_recomputes_generated_columns_of_updates_and_inserts(spark, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = _table(spark, path)
    source = spark.createDataFrame(
        [(2, dt.datetime(2023, 2, 2, 1, tzinfo=UTC)), (3, dt.datetime(2024, 4, 4, 23, tzinfo=UTC))],
        "id bigint, eventTime timestamp",
    )
    (
        table.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"eventTime": "s.eventTime"})
        .whenNotMatchedInsertAll()
        .execute()
    )
    assert _rows(path) == {
        1: (dt.date(2020, 1, 1), dt.date(2020, 1, 1)),
        2: (dt.date(2023, 2, 2), dt.date(2023, 2, 2)),
        3: (dt.date(2024, 4, 4), dt.date(2024, 4, 4)),
    }
    version = RsTable(path).version()
    wrong = (
        table.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdate(set={"eventDate": "'1999-01-01'"})
    )
    assert _code(wrong.execute) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert RsTable(path).version() == version


def test_without_deletion_vectors_the_change_is_refused(spark, tmp_path: Path) -> None:
    """delta-rs's copy-on-write UPDATE does not recompute generated columns: refused."""
    path = str(tmp_path / "t")
    table = _table(spark, path, deletion_vectors=False)
    version = RsTable(path).version()
    update = {"eventTime": "'2022-03-04T10:00:00Z'"}
    assert _code(lambda: table.update("id = 1", update)) == "DELTA_UNSUPPORTED_BY_LAKEFEED"
    assert RsTable(path).version() == version
