"""The one writer of lakefeed's own Delta commits (``log_writer.commit_actions``): one
``commitInfo`` shape, put-if-absent, in-commit timestamps where the table has them on.
Spark-free: the tables are written by delta-rs, the commits read back as JSON lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.core.errors import ConflictError
from lakefeed.delta import log, log_writer, tblprops

ICT = log_writer.IN_COMMIT_TIMESTAMPS


def _table(tmp_path: Path) -> str:
    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"id": pa.array([1, 2], pa.int64())}))
    return root


def _lines(root: str, version: int) -> list[dict[str, Any]]:
    text = Path(log.commit_path(root, version)).read_text()
    return [json.loads(line) for line in text.splitlines()]


def _note(root: str, read_version: int, **keys: Any) -> int:
    """A commit of only a commitInfo (as a metadata-free change would have), on ``read_version``."""
    info = log_writer.commit_info("NOTE", {"n": str(read_version)}, **keys)
    return log_writer.commit_actions(root, read_version, [info], set(), None)


def test_every_commit_carries_one_commit_info_shape_first(tmp_path: Path) -> None:
    root = _table(tmp_path)
    version = tblprops.set_properties(root, DeltaTable(root), {"owner": "ops"})
    lines = _lines(root, version)
    assert list(lines[0]) == ["commitInfo"] and [next(iter(a)) for a in lines[1:]] == ["metaData"]
    info = lines[0]["commitInfo"]
    assert info["operation"] == "SET TBLPROPERTIES"
    assert info["operationParameters"] == {"properties": json.dumps({"owner": "ops"})}
    assert info["engineInfo"] == "lakefeed" and info["readVersion"] == version - 1
    assert info["isBlindAppend"] is True and isinstance(info["timestamp"], int)
    assert "inCommitTimestamp" not in info  # the table does not have them on
    assert DeltaTable(root).metadata().configuration["owner"] == "ops"
    # what the caller gives is kept: metrics as text, its own keys
    version = _note(root, version, metrics={"numFiles": 3}, isolationLevel="SnapshotIsolation")
    info = _lines(root, version)[0]["commitInfo"]
    assert info["operationMetrics"] == {"numFiles": "3"}
    assert info["isolationLevel"] == "SnapshotIsolation" and info["isBlindAppend"] is False


def test_in_commit_timestamps_where_the_table_has_them_on(tmp_path: Path) -> None:
    """PROTOCOL.md "In-Commit Timestamps": from the commit that turns them on, every commit
    carries one, later than the previous commit's, until a commit turns them off."""
    root = _table(tmp_path)
    on = tblprops.set_properties(root, DeltaTable(root), {ICT: "true"})
    first = _lines(root, on)[0]["commitInfo"]["inCommitTimestamp"]
    # the previous commit's stamp lies ahead of this clock: the next one still comes after it
    lines = _lines(root, on)
    lines[0]["commitInfo"]["inCommitTimestamp"] = first + 3_600_000
    Path(log.commit_path(root, on)).write_text("".join(json.dumps(a) + "\n" for a in lines))
    after = _note(root, on)
    assert _lines(root, after)[0]["commitInfo"]["inCommitTimestamp"] == first + 3_600_001
    off = tblprops.set_properties(root, DeltaTable(root), {ICT: "false"})
    assert "inCommitTimestamp" not in _lines(root, off)[0]["commitInfo"]
    assert "inCommitTimestamp" not in _lines(root, _note(root, off))[0]["commitInfo"]


def test_a_taken_version_is_rebased_past_a_blind_append_or_refused(tmp_path: Path) -> None:
    root = _table(tmp_path)
    write_deltalake(root, pa.table({"id": pa.array([3], pa.int64())}), mode="append")
    assert _note(root, 0) == 2  # version 1, an append of delta-rs's, does not conflict
    info = log_writer.commit_info("NOTE", {})
    with pytest.raises(ConflictError, match="conflicted with another commit of version 1"):
        log_writer.commit_actions(root, 0, [info], set(), None, rebase=False)
    assert log.latest_version(root) == 2
    with pytest.raises(ValueError, match="exactly one commitInfo"):
        log_writer.commit_actions(root, 2, [info, info], set(), None)
