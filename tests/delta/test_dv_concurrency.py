"""Two writers on a table with deletion vectors: a stream appending while MERGE and DELETE
remove rows (DELETE with deletion vectors, MERGE by rewriting the files, whose old deletion
vectors it honours). Delta's conflict rules keep both: no delete is lost, no deleted row comes
back, no appended row is lost or doubled."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from lakefeed.connectors import delta
from lakefeed.core.errors import ConflictError
from lakefeed.delta import create, merger, operations

pytestmark = pytest.mark.compat  # format("delta") on the test session

SEEDS = 200


def _ids(root: str) -> list[tuple[int, str]]:
    rows = QueryBuilder().register("t", DeltaTable(root)).execute("select id, src from t")
    return sorted((r["id"], r["src"]) for r in pa.table(rows).to_pylist())


def _wait_for(root: str, version: int, query) -> None:
    """Until the table reaches ``version`` (the stream commits), or the stream failed."""
    deadline = time.monotonic() + 120
    while DeltaTable(root).version() < version:
        assert query.isActive, query.exception()
        assert time.monotonic() < deadline, f"the stream stalled at {DeltaTable(root).version()}"
        time.sleep(0.2)


def _retried(change) -> int:
    """Run ``change`` until it commits; how many conflicts it met (Delta's: retry)."""
    for attempt in range(50):
        try:
            change()
            return attempt
        except ConflictError:
            time.sleep(0.05)
    raise AssertionError("a change never committed")


def test_a_stream_appends_while_merge_and_delete_remove_rows(spark, tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    create.create(
        root,
        pa.schema([("id", pa.int64()), ("src", pa.string())]),
        configuration={"delta.enableDeletionVectors": "true"},
    )
    write_deltalake(
        root, pa.table({"id": list(range(SEEDS)), "src": ["seed"] * SEEDS}), mode="append"
    )
    rows = spark.readStream.format("rate").option("rowsPerSecond", 200).load()
    query = delta.write_stream(
        rows.selectExpr("value + 100000 AS id", "'stream' AS src"),
        root,
        str(tmp_path / "cp"),
        trigger={"processingTime": "200 milliseconds"},
    )
    deleted: set[int] = set()
    try:
        _wait_for(root, 4, query)  # the stream is committing
        for step in range(8):
            gone = {step * 10 + k for k in range(3)}
            source = pa.table({"id": sorted(gone), "src": ["x"] * len(gone)})
            _retried(
                lambda source=source: merger.merge(
                    root, source, "target.id = source.id", [merger.Clause(merger.MATCHED_DELETE)]
                )
            )
            _retried(
                lambda step=step: operations.delete(
                    root, f"id >= {step * 10 + 3} AND id < {step * 10 + 6}"
                )
            )
            deleted |= gone | {step * 10 + k for k in range(3, 6)}
        _wait_for(root, DeltaTable(root).version() + 2, query)  # appends after the deletes
    finally:
        query.stop()
    rows_now = _ids(root)
    seeds = [i for i, src in rows_now if src == "seed"]
    streamed = [i - 100000 for i, src in rows_now if src == "stream"]
    assert seeds == [i for i in range(SEEDS) if i not in deleted]  # none lost, none back
    assert streamed == list(range(len(streamed))) and len(streamed) > 0  # no gap, no double
    history = DeltaTable(root).history()
    assert any(h["operation"] == "DELETE" and h.get("engineInfo") == "lakefeed" for h in history)
