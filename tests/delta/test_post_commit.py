"""A failure after a Delta commit (checkpoint, log cleanup) never fails or undoes the commit
(issue 31), Spark-free: real tables on local disk whose checkpoints cannot be written because
``_delta_log/_last_checkpoint`` is a folder (a storage fault at the checkpoint's last step)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from lakefeed.delta import commit, files, post_commit

APP = "0f1e2d3c-aaaa-bbbb-cccc-000000000000"


def _rows(ids: range) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": pa.array(list(ids), pa.int64())})


def _table(root: Path, interval: int) -> None:
    """A table of rows 0..2 whose checkpoints come every ``interval`` versions."""
    commit.commit_files(
        commit.WriteSpec(str(root), "append", ()),
        files.write_batches(str(root), iter([_rows(range(3))]), (), "first-"),
        _rows(range(0)).schema,
    )
    DeltaTable(str(root)).alter.set_table_properties(
        {"delta.checkpointInterval": str(interval)},
        post_commithook_properties=post_commit.NO_HOOKS,
    )


def _block_checkpoints(root: Path) -> None:
    last = root / "_delta_log" / "_last_checkpoint"
    if last.exists():
        last.unlink()
    (last / "obstacle").mkdir(parents=True)


def _unblock_checkpoints(root: Path) -> None:
    (root / "_delta_log" / "_last_checkpoint" / "obstacle").rmdir()
    (root / "_delta_log" / "_last_checkpoint").rmdir()


def _ids(root: Path) -> list[int]:
    return sorted(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist())


def _append(root: Path, ids: range, prefix: str) -> commit.CommitResult:
    written = files.write_batches(str(root), iter([_rows(ids)]), (), prefix)
    return commit.commit_files(
        commit.WriteSpec(str(root), "append", ()), written, _rows(ids).schema
    )


def test_a_failed_checkpoint_leaves_the_append_committed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "t"
    _table(root, interval=1)
    _block_checkpoints(root)
    with caplog.at_level(logging.WARNING, "lakefeed.delta.commit"):
        result = _append(root, range(3, 5), "batch-")
    assert result.version == 2
    assert [(d.step, d.version) for d in result.deferred] == [("checkpoint", 2)]
    warned = [r for r in caplog.records if getattr(r, "step", None) == "checkpoint"]
    assert warned and warned[0].version == 2 and warned[0].table == str(root)  # type: ignore[attr-defined]
    assert _ids(root) == [0, 1, 2, 3, 4]


def test_a_failed_checkpoint_leaves_the_stream_batch_committed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root, interval=1)
    _block_checkpoints(root)
    spec = commit.WriteSpec(str(root), "append", ())
    for batch, ids in enumerate((range(3, 5), range(5, 6))):
        prefix = files.stream_file_prefix(APP, batch) + "00000-"
        written = files.write_batches(str(root), iter([_rows(ids)]), (), prefix)
        result = commit.commit_stream_batch(spec, written, _rows(ids).schema, APP, batch)
        assert not result.skipped and result.deferred[0].step == "checkpoint"
    replay = commit.commit_stream_batch(spec, [], _rows(range(0)).schema, APP, 1)
    assert replay.skipped  # the batch is in the table: its replay writes nothing
    assert _ids(root) == list(range(6))


def test_a_checkpoint_owed_is_written_at_the_next_commit(tmp_path: Path) -> None:
    """Repaired later: a checkpoint that failed is written by the next commit, due or not."""
    root = tmp_path / "t"
    _table(root, interval=2)  # version 1
    _block_checkpoints(root)
    assert _append(root, range(3, 4), "a-").deferred[0].step == "checkpoint"  # version 2: due
    _unblock_checkpoints(root)
    assert _append(root, range(4, 5), "b-").deferred == ()  # version 3: not due, but owed
    assert DeltaTable(str(root)).protocol() is not None
    assert "00000000000000000003.checkpoint.parquet" in os.listdir(root / "_delta_log")
    assert _append(root, range(5, 6), "c-").deferred == ()  # version 4: due, as before
    assert _ids(root) == list(range(6))


def test_the_log_decides_whether_a_write_committed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root, interval=100)
    written = files.write_batches(str(root), iter([_rows(range(3, 5))]), (), "mine-")
    others = files.write_batches(str(root), iter([_rows(range(5, 6))]), (), "other-")
    commit.commit_stream_batch(
        commit.WriteSpec(str(root), "append", ()), written, _rows(range(0)).schema, APP, 7
    )
    paths = [f.path for f in written]
    assert post_commit.landed(str(root), 1, paths, None) == 2
    assert post_commit.landed(str(root), 2, paths, None) is None  # not after version 2
    assert post_commit.landed(str(root), -1, [f.path for f in others], None) is None
    assert post_commit.landed(str(root), 1, [], (APP, 7)) == 2  # no files: its txn
    assert post_commit.landed(str(root), 1, [], (APP, 8)) is None
    # a failed write's cleanup removes only what the log does not hold
    post_commit.remove_unless_committed(str(root), written)
    post_commit.remove_unless_committed(str(root), others)
    assert all((root / f.path).exists() for f in written)
    assert not any((root / f.path).exists() for f in others)
    assert _ids(root) == [0, 1, 2, 3, 4]
