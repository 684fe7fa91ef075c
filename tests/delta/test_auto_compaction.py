"""Automatic compaction of streaming tables (lakefeed.runtime.compaction)."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from lakefeed.core.errors import ConfigError
from lakefeed.runtime.compaction import AutoCompactor, Policy, compact_if_needed, enabled
from tests.support.delta import log_actions

POLICY = Policy(min_files=5, max_file_size=64 * 1024 * 1024)


def _append(path: Path, ids: range, batch: int, **kwargs: object) -> None:
    """One micro-batch as the stream sink commits it: an append with txn(query, batch)."""
    rows = pa.table({"id": pa.array(ids, pa.int64()), "day": [f"d{i % 2}" for i in ids]})
    props = CommitProperties(app_transactions=[Transaction("query-1", batch)])
    write_deltalake(str(path), rows, mode="append", commit_properties=props, **kwargs)  # type: ignore[arg-type]


def _ids(path: Path) -> list[int]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist())


def _files(path: Path) -> int:
    return len(DeltaTable(str(path)).file_uris())


def test_switches_follow_delta_and_dlt_names() -> None:
    assert enabled({})  # DLT manages (compacts) a pipeline's tables by default
    assert not enabled({"pipelines.autoOptimize.managed": "false"})
    assert enabled(
        {"pipelines.autoOptimize.managed": "false", "delta.autoOptimize.autoCompact": "auto"}
    )
    assert not enabled({"delta.autoOptimize.autoCompact": "false"})
    conf = {"spark.databricks.delta.autoCompact.minNumFiles": "7"}
    assert Policy.from_conf(conf.get) == Policy(min_files=7)
    with pytest.raises(ConfigError, match="minNumFiles"):
        Policy.from_conf({"spark.databricks.delta.autoCompact.minNumFiles": "many"}.get)


@pytest.mark.parametrize("partitioned", [False, True])
def test_file_count_stays_bounded_and_rows_stay(tmp_path: Path, partitioned: bool) -> None:
    path = tmp_path / "t"
    kwargs = {"partition_by": ["day"]} if partitioned else {}
    most = 0
    for batch in range(24):
        _append(path, range(batch * 4, batch * 4 + 4), batch, **kwargs)
        compact_if_needed(str(path), POLICY)
        most = max(most, _files(path))
    partitions = 2 if partitioned else 1
    assert most <= partitions * POLICY.min_files  # 24 or 48 files without compaction
    assert _ids(path) == list(range(96))
    optimize = [c for c in log_actions(path, "commitInfo") if c.get("operation") == "OPTIMIZE"]
    assert optimize
    # a compaction rewrites: its adds and removes carry dataChange=false
    assert all(not a["dataChange"] for a in log_actions(path, "remove"))


def test_a_table_that_opts_out_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, range(2), 0, configuration={"delta.autoOptimize.autoCompact": "false"})
    for batch in range(1, 8):
        _append(path, range(batch * 2, batch * 2 + 2), batch)
    assert compact_if_needed(str(path), POLICY) == 0
    assert _files(path) == 8


def test_concurrent_appends_and_compactions_both_commit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _append(path, range(1), 0)
    done = threading.Event()
    batches = [1]

    def stream() -> None:
        while not done.is_set() and batches[0] < 200:
            n = batches[0]
            _append(path, range(n, n + 1), n)
            batches[0] += 1

    writer = threading.Thread(target=stream)
    writer.start()
    compactor = AutoCompactor([str(path)], Policy(min_files=3), interval=0.01).start()
    try:
        while batches[0] < 60:
            threading.Event().wait(0.05)
    finally:
        done.set()
        writer.join()
        compactor.stop()
    assert compactor.removed[str(path)] > 0  # compactions committed between the appends
    assert _ids(path) == list(range(batches[0]))  # every append committed, none twice
    assert DeltaTable(str(path)).transaction_version("query-1") == batches[0] - 1


def test_delta_streams_do_not_reread_compacted_files(spark, tmp_path: Path) -> None:
    """A stream writes many small batches while the compactor runs beside it; a Delta stream
    reading the compacted table gets each row once, before and after a later compaction."""
    source, target, copy = tmp_path / "s", tmp_path / "t", tmp_path / "u"
    for batch in range(24):
        _append(source, range(batch * 3, batch * 3 + 3), batch)
    compactor = AutoCompactor([str(target)], Policy(min_files=3), interval=0.05)

    def copy_stream(src: Path, dst: Path, checkpoint: str) -> None:
        query = (
            spark.readStream.format("delta")
            .option("maxFilesPerTrigger", 1)
            .load(str(src))
            .writeStream.format("delta")
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start(str(dst))
        )
        try:
            query.awaitTermination(240)
        finally:
            query.stop()

    copy_stream(source, target, "c1")  # creates the table: the compactor then finds it
    compactor.start()
    try:
        for batch in range(24, 40):
            _append(source, range(batch * 3, batch * 3 + 3), batch)
        copy_stream(source, target, "c1")
    finally:
        compactor.stop()
    assert compactor.removed[str(target)] > 0
    assert _ids(target) == list(range(120))
    copy_stream(target, copy, "c2")
    assert _ids(copy) == list(range(120))
    compact_if_needed(str(target), Policy(min_files=2))  # what is left, after the read
    copy_stream(target, copy, "c2")
    assert _ids(copy) == list(range(120))
