"""Spark-free core of the Delta connector: stats, schema rules, files, offsets, commits.

Real Delta tables written by delta-rs and by lakefeed's own commit path, read back by delta-rs.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction

from lakefeed.connectors.delta import offsets
from lakefeed.connectors.delta.offsets import INITIAL, ChangeFeed, DeltaOffset, FeedOptions
from lakefeed.core.errors import DataLossRiskError
from lakefeed.delta import commit, files, log, pruning, snapshot
from lakefeed.delta.schema import SchemaMismatchError, merge_schema
from lakefeed.delta.stats import FileStats, footer_stats

APP = "0f1e2d3c-aaaa-bbbb-cccc-000000000000"


def _batch(ids: range, k: str | None = "a") -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {"id": pa.array(list(ids), pa.int64()), "k": pa.array([k] * len(ids), pa.string())}
    )


def _stream_commit(root: Path, batch_id: int, ids: range, **spec: object) -> commit.CommitResult:
    written = files.write_batches(
        str(root),
        iter([_batch(ids)]),
        spec.get("partition_by", ()),  # type: ignore[arg-type]
        files.stream_file_prefix(APP, batch_id) + "00000-",
    )
    write = commit.WriteSpec(str(root), "append", tuple(spec.get("partition_by", ())))  # type: ignore[arg-type]
    return commit.commit_stream_batch(write, written, _batch(ids).schema, APP, batch_id)


def _data_files(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, f), root)
        for d, _, names in os.walk(root)
        if "_delta_log" not in d
        for f in names
        if f.endswith(".parquet")
    }


def _referenced(root: Path) -> set[str]:
    return {os.path.relpath(u, root) for u in DeltaTable(str(root)).file_uris()}


def test_stats_bounds_never_lie() -> None:
    stats = FileStats(
        pa.schema(
            [
                ("i", pa.int32()),
                ("s", pa.string()),
                ("t", pa.timestamp("us", "UTC")),
                ("f", pa.float64()),
                ("d", pa.date32()),
            ]
        )
    )
    stats.add(
        pa.table(
            {
                "i": pa.array([3, None, -1], pa.int32()),
                "s": ["b" * 40, "a", None],
                "t": pa.array(
                    [dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=dt.UTC)] * 3,
                    pa.timestamp("us", "UTC"),
                ),
                "f": [1.0, float("nan"), 2.0],
                "d": [dt.date(2024, 1, 1), dt.date(2024, 2, 1), None],
            }
        )
    )
    parsed = json.loads(stats.to_json())
    assert parsed["numRecords"] == 3
    assert parsed["nullCount"] == {"i": 1, "s": 1, "t": 0, "f": 0, "d": 1}
    assert parsed["minValues"]["i"] == -1 and parsed["maxValues"]["i"] == 3
    assert parsed["minValues"]["s"] == "a" and "s" not in parsed["maxValues"]  # 40 chars
    assert parsed["minValues"]["t"] == "2024-01-01T00:00:00.001Z"
    assert parsed["maxValues"]["t"] == "2024-01-01T00:00:00.002Z"  # rounded up, never down
    assert "f" not in parsed["minValues"]  # NaN: no bounds
    assert parsed["maxValues"]["d"] == "2024-02-01"


def test_footer_stats_equal_computed_stats(tmp_path: Path) -> None:
    """Files Spark's writer produced get their statistics from the footer: same JSON as
    computing them from the rows, over several row groups (one of them all nulls)."""
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("i", pa.int64()),
            ("s", pa.string()),
            ("t", pa.timestamp("us", "UTC")),
            ("d", pa.date32()),
            ("b", pa.bool_()),
            ("n", pa.struct([("x", pa.int32())])),
        ]
    )
    stamp = dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=dt.UTC)
    table = pa.table(
        {
            "i": [5, None, -2, None],
            "s": ["b" * 40, "a", None, None],
            "t": [stamp, stamp + dt.timedelta(days=1), None, None],
            "d": [dt.date(2024, 1, 1), dt.date(2024, 2, 1), None, None],
            "b": [True, False, None, None],
            "n": [{"x": 1}, None, {"x": 2}, None],
        },
        schema=schema,
    )
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=2)
    computed = FileStats(schema)
    computed.add(table)
    from_rows = json.loads(computed.to_json())
    from_footer = json.loads(footer_stats(pq.read_metadata(tmp_path / "f.parquet"), schema))
    assert "n" not in from_rows["nullCount"]  # no top-level figure for a struct in either
    assert from_footer == from_rows
    assert from_footer["maxValues"]["i"] == 5 and from_footer["nullCount"]["i"] == 2


def test_schema_merge_rules() -> None:
    table = pa.schema([("id", pa.int64()), ("s", pa.string())])
    assert merge_schema(table, pa.schema([("id", pa.int64())]), merge=False) == table
    merged = merge_schema(table, pa.schema([("id", pa.int64()), ("n", pa.int32())]), merge=True)
    assert merged.names == ["id", "s", "n"]
    with pytest.raises(SchemaMismatchError, match='option\\("mergeSchema", "true"\\)'):
        merge_schema(table, pa.schema([("n", pa.int32())]), merge=False)
    with pytest.raises(SchemaMismatchError, match="incompatible type change for column 'id'"):
        merge_schema(table, pa.schema([("id", pa.string())]), merge=True)
    with pytest.raises(SchemaMismatchError, match="differs only by case"):
        merge_schema(table, pa.schema([("ID", pa.int64())]), merge=True)
    # Large/view variants and nullability are not type changes.
    assert merge_schema(table, pa.schema([pa.field("s", pa.large_string(), False)]), merge=False)


def test_partitioned_files_roundtrip_with_awkward_values(tmp_path: Path) -> None:
    batch = pa.RecordBatch.from_pydict(
        {"id": pa.array([1, 2, 3, 4], pa.int64()), "k": ["a/b", "x=y %", None, "a/b"]}
    )
    written = files.write_batches(str(tmp_path), iter([batch]), ["k"], "part-00000-")
    assert len(written) == 3
    spec = commit.WriteSpec(str(tmp_path), "append", ("k",))
    commit.commit_files(spec, written, batch.schema)
    back = DeltaTable(str(tmp_path)).to_pyarrow_table().sort_by("id").to_pylist()
    assert back == [
        {"id": 1, "k": "a/b"},
        {"id": 2, "k": "x=y %"},
        {"id": 3, "k": None},
        {"id": 4, "k": "a/b"},
    ]
    target = pa.schema([("id", pa.int64()), ("k", pa.string()), ("missing", pa.float64())])
    table = log.open_table(str(tmp_path))
    rows = [
        row
        for f in pruning.snapshot_files(table, str(tmp_path))
        for b in files.read_file(str(tmp_path), f, target)
        for row in b.to_pylist()
    ]
    assert sorted(rows, key=lambda r: r["id"])[1] == {"id": 2, "k": "x=y %", "missing": None}


def test_nan_partition_values_are_written_and_read_back(tmp_path: Path) -> None:
    """Issue 31: NaN, 1.0 and NULL as DOUBLE partition values: three rows back, NaN in its own
    folder named as Delta (Java) spells it, also infinities."""
    values = [float("nan"), 1.0, None, float("inf"), float("-inf")]
    batch = pa.RecordBatch.from_pydict(
        {"id": pa.array(range(5), pa.int64()), "p": pa.array(values, pa.float64())}
    )
    written = files.write_batches(str(tmp_path), iter([batch]), ["p"], "part-00000-")
    assert sorted(f.partition_values["p"] or "" for f in written) == [
        "",
        "-Infinity",
        "1.0",
        "Infinity",
        "NaN",
    ]
    commit.commit_files(commit.WriteSpec(str(tmp_path), "append", ("p",)), written, batch.schema)
    back = DeltaTable(str(tmp_path)).to_pyarrow_table().sort_by("id").column("p").to_pylist()
    assert math.isnan(back[0]) and back[1:] == values[1:]
    target = pa.schema([("id", pa.int64()), ("p", pa.float64())])
    table = log.open_table(str(tmp_path))
    read = {
        row["id"]: row["p"]
        for f in pruning.snapshot_files(table, str(tmp_path))
        for b in files.read_file(str(tmp_path), f, target)
        for row in b.to_pylist()
    }
    assert sorted(read) == [0, 1, 2, 3, 4] and math.isnan(read[0]) and read[3] == float("inf")


def test_failed_task_removes_its_partial_files(tmp_path: Path) -> None:
    def batches():
        yield _batch(range(3), "a")
        yield _batch(range(3), "b")
        raise RuntimeError("task died")

    with pytest.raises(RuntimeError):
        files.write_batches(str(tmp_path), batches(), ["k"], "part-00000-")
    assert _data_files(tmp_path) == set()


def test_stream_commit_is_idempotent_and_cleans_uncommitted_attempts(tmp_path: Path) -> None:
    root = tmp_path / "t"
    # Attempt 1 of batch 0 wrote files, then the driver died before the Delta commit.
    files.write_batches(
        str(root), iter([_batch(range(5))]), (), files.stream_file_prefix(APP, 0) + "00000-"
    )
    assert len(_data_files(root)) == 1
    first = _stream_commit(root, 0, range(5))
    assert first.version == 0 and first.removed_orphans == 1
    assert _data_files(root) == _referenced(root)
    second = _stream_commit(root, 1, range(5, 8))
    assert second.version == 1
    # Batch 1 replayed after the driver died between the Delta commit and Spark's commit log.
    replay = _stream_commit(root, 1, range(5, 8))
    assert replay.skipped and replay.removed_orphans == 1
    assert DeltaTable(str(root)).transaction_version(APP) == 1
    assert sorted(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == list(
        range(8)
    )
    assert _data_files(root) == _referenced(root)
    commit_json = Path(log.commit_path(str(root), 1)).read_text()
    assert f'"appId":"{APP}"' in commit_json and '"version":1' in commit_json


def _batch_commit(root: Path, batch_id: int, ids: range, offsets: str) -> commit.CommitResult:
    """Batch ``batch_id`` of stream APP over source ``offsets`` (their hash)."""
    written = files.write_batches(
        str(root), iter([_batch(ids)]), (), files.stream_file_prefix(APP, batch_id) + "00000-"
    )
    write = commit.WriteSpec(str(root), "append", (), source_offsets=offsets)
    return commit.commit_stream_batch(write, written, _batch(ids).schema, APP, batch_id)


def test_a_batch_held_over_other_offsets_is_a_checkpoint_behind_its_table(
    tmp_path: Path,
) -> None:
    """A replay (same batch, same offsets) is skipped; the same batch id planned again over a
    grown source (a checkpoint restored from a backup, its last batch deleted), or an older
    batch, is refused before it commits, naming the table version the checkpoint matches."""
    root = tmp_path / "t"
    _batch_commit(root, 0, range(3), "files-1-3")
    _batch_commit(root, 1, range(3, 5), "files-4-5")
    assert _batch_commit(root, 1, range(3, 5), "files-4-5").skipped  # a replay
    with pytest.raises(DataLossRiskError) as refused:
        _batch_commit(root, 1, range(3, 7), "files-4-7")
    assert refused.value.code == "CHECKPOINT_BEHIND_TABLE"
    assert "TO VERSION AS OF 0" in str(refused.value.fix)  # version 0 holds batch 0
    with pytest.raises(DataLossRiskError, match="holds batches up to 1") as older:
        _batch_commit(root, 0, range(3), "files-1-3")
    assert older.value.code == "CHECKPOINT_BEHIND_TABLE"
    assert sorted(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == list(
        range(5)
    )
    _batch_commit(root, 2, range(5, 7), "files-6-7")  # the next batch goes on as ever
    info = DeltaTable(str(root)).history(1)[0]
    assert info["lakefeed.sourceOffsets"] == "files-6-7"
    # A batch without rows (an expectation dropped them all) still records its txn.
    empty = commit.WriteSpec(str(root), "append", (), source_offsets="files-8")
    commit.commit_stream_batch(empty, [], _batch(range(0)).schema, APP, 3)
    assert DeltaTable(str(root)).transaction_version(APP) == 3


def test_a_batch_fingerprint_is_its_source_offsets(tmp_path: Path) -> None:
    from lakefeed.spark import offset_log

    (tmp_path / "offsets").mkdir()
    sources = ['{"sourceId":"a","index":5}', "-"]
    for batch, planned_at in ((1, 100), (2, 200), (3, 300)):
        index = 7 if batch == 3 else 5
        meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": planned_at})
        lines = ["v1", meta, sources[0].replace("5", str(index)), sources[1]]
        (tmp_path / "offsets" / str(batch)).write_text("\n".join(lines))
    first, again, grown = (offset_log.fingerprint(tmp_path, b) for b in (1, 2, 3))
    assert first == again != grown  # planning time aside, same offsets, same hash
    assert offset_log.fingerprint(tmp_path, 4) is None


def test_foreign_files_are_never_removed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _stream_commit(root, 0, range(2))
    foreign = root / "part-lf-ffffffff-b00000001-00000-x.parquet"
    foreign.write_bytes(b"not ours")
    (root / "notes.txt").write_text("keep")
    _stream_commit(root, 1, range(2, 4))
    assert foreign.exists() and (root / "notes.txt").exists()


def test_a_stream_keeps_its_table_open_and_sees_other_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One log load per stream, not per batch; other writers' commits (a zombie's txn, a
    compaction) are still seen, from the commits read since."""
    root = tmp_path / "t"
    _stream_commit(root, 0, range(2))  # creates the table
    _stream_commit(root, 1, range(2, 4))  # opens it and reads the query's txn
    opens: list[str] = []
    replays: list[str] = []
    real_open, real_replay = snapshot.DeltaTable.__init__, snapshot.DeltaTable.transaction_version

    def counted_open(self: DeltaTable, path: str, *args: object, **kwargs: object) -> None:
        opens.append(path)
        real_open(self, path, *args, **kwargs)  # type: ignore[arg-type]

    def counted_replay(self: DeltaTable, app_id: str) -> int | None:
        replays.append(app_id)
        return real_replay(self, app_id)

    monkeypatch.setattr(snapshot.DeltaTable, "__init__", counted_open)
    monkeypatch.setattr(snapshot.DeltaTable, "transaction_version", counted_replay)
    for batch in range(2, 5):
        assert _stream_commit(root, batch, range(batch * 2, batch * 2 + 2)).version == batch
    assert opens == [] and replays == []
    monkeypatch.undo()
    # Another writer commits batch 5 of the same query id (a zombie driver), then compacts.
    other = DeltaTable(str(root))
    other.create_write_transaction(
        [],
        "append",
        schema=_batch(range(1)).schema,
        commit_properties=CommitProperties(app_transactions=[Transaction(APP, 5)]),
    )
    DeltaTable(str(root)).optimize.compact()
    assert _stream_commit(root, 5, range(10, 12)).skipped
    assert _stream_commit(root, 6, range(12, 14)).version == 7  # 5: the zombie, 6: compaction
    ids = DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == [*range(10), 12, 13]


@pytest.mark.parametrize("recreated", [None, 1, 2, 4, 5, 9])
def test_a_stream_refuses_its_table_deleted_under_it(tmp_path: Path, recreated: int | None) -> None:
    """Batches 0-4 committed through the kept handle (at version 3 when batch 4 committed); the
    table is deleted and, unless None, created again with that many commits: a log that went back
    (2: delta-rs refuses it; 1: delta-rs keeps the old state), one that ends at the held version
    (4), or a new table past it (5, 9). Neither a replay of batch 4 is skipped by the old txn nor
    batch 5 written: both fail, the new table as it was."""
    root = tmp_path / "t"
    for batch in range(5):
        _stream_commit(root, batch, range(batch * 2, batch * 2 + 2))
    shutil.rmtree(root)
    if recreated is not None:
        _rs_table(root, recreated)
    log_files = sorted(os.listdir(root / "_delta_log")) if recreated else None
    for batch in (4, 5):
        with pytest.raises(DataLossRiskError, match=r"DELTA_TABLE_REPLACED.*deleted or replaced"):
            _stream_commit(root, batch, range(100, 102))
    assert (sorted(os.listdir(root / "_delta_log")) if recreated else None) == log_files
    if recreated:
        assert DeltaTable(str(root)).to_pyarrow_table().num_rows == 2 * recreated


def test_a_handle_that_never_committed_opens_the_new_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _rs_table(root, 3)
    kept = snapshot.Snapshot(str(root))
    old = kept.latest()
    assert old is not None and kept.transaction_version(APP) is None
    shutil.rmtree(root)
    _rs_table(root, 2)  # a log that went back: delta-rs's update_incremental refuses it
    new = kept.latest()
    assert new is not None and new.version() == 1
    assert new.metadata().id == DeltaTable(str(root)).metadata().id != old.metadata().id


_KS = pa.schema([("id", pa.int64()), ("k", pa.string())])


@pytest.mark.parametrize(
    "replacement",
    [
        {"data": {"id": [100], "k": ["z"]}},  # one commit, as long as the held log: unnoticed
        {"data": {"id": [100], "k": ["z"]}, "partition_by": ["k"]},  # rows would lose k
        {"data": {"id": [100]}},  # column k would be dropped from the batch
        {"data": {"id": [100], "k": ["z"]}, "commits": 3},  # longer: replayed onto the old state
        None,  # deleted: no table at all
    ],
)
def test_a_replaced_table_is_refused_at_the_first_commit(
    tmp_path: Path, replacement: dict | None
) -> None:
    """A stream whose handle opened its table (the replay check of its first batch) and has not
    committed yet: the table is deleted, and perhaps created again with a new log, before the
    batch commits. Its commit is refused as a replaced table, whatever delta-rs would have done
    (written the batch into the new table without its column or partition values, or refused
    with its own error), and the new table stays as it was."""
    root = tmp_path / "t"
    DeltaTable.create(str(root), schema=_KS)
    kept = snapshot.for_stream(str(root), APP)
    assert kept.latest() is not None and kept.transaction_version(APP) is None
    shutil.rmtree(root)
    if replacement is not None:
        data = pa.table({c: pa.array(v) for c, v in replacement["data"].items()})
        for _ in range(replacement.get("commits", 1)):
            write_deltalake(
                str(root), data, mode="append", partition_by=replacement.get("partition_by")
            )
    log_files = sorted(os.listdir(root / "_delta_log")) if replacement else None
    for batch in (0, 0, 1):  # the batch, its retry, the next: all refused
        with pytest.raises(DataLossRiskError, match=r"DELTA_TABLE_REPLACED.*planned on table"):
            _stream_commit(root, batch, range(2))
    assert (sorted(os.listdir(root / "_delta_log")) if replacement else None) == log_files


def test_a_handle_checks_its_table_until_its_first_commit_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The identity check costs one log load before a stream's first commit, then none."""
    root = tmp_path / "t"
    DeltaTable.create(str(root), schema=_KS)
    assert snapshot.for_stream(str(root), APP).current() is not None  # the write's planning
    opens: list[str] = []
    real_open = snapshot.DeltaTable.__init__

    def counted_open(self: DeltaTable, path: str, *args: object, **kwargs: object) -> None:
        opens.append(path)
        real_open(self, path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(snapshot.DeltaTable, "__init__", counted_open)
    for batch in range(3):
        assert _stream_commit(root, batch, range(batch * 2, batch * 2 + 2)).version == batch + 1
    assert opens == [str(root)]  # the check of its first commit


def _rs_table(root: Path, commits: int, rows: int = 2) -> None:
    for c in range(commits):
        data = pa.table({"id": pa.array(range(c * rows, c * rows + rows), pa.int64())})
        write_deltalake(str(root), data, mode="append")


def _read_all(feed: ChangeFeed, start: DeltaOffset, end: DeltaOffset, root: Path) -> list[int]:
    target = pa.schema([("id", pa.int64())])
    return [
        v
        for f in feed.files_between(start, end)
        for b in files.read_file(str(root), f, target)
        for v in b.column("id").to_pylist()
    ]


def test_offsets_snapshot_then_commits_with_file_limit(tmp_path: Path) -> None:
    _rs_table(tmp_path, 3)
    feed = ChangeFeed(str(tmp_path), FeedOptions(max_files=2))
    seen: list[int] = []
    start = INITIAL
    ends = []
    for _ in range(6):
        end = feed.latest_offset(start, log.latest_version(str(tmp_path)), limited=True)
        if end == start:
            break
        seen += _read_all(feed, start, end, tmp_path)
        ends.append(end)
        start = DeltaOffset.from_dict(json.loads(json.dumps(end.to_dict())))
        if len(ends) == 2:
            _rs_table(tmp_path, 0)
            write_deltalake(
                str(tmp_path), pa.table({"id": pa.array([100], pa.int64())}), mode="append"
            )
    assert sorted(seen) == [0, 1, 2, 3, 4, 5, 100]
    # The snapshot batch stays inside the snapshot; a finished version points at the next one.
    assert ends[0] == DeltaOffset(2, 1, True)
    assert ends[1] == DeltaOffset(3, -1, False)
    assert ends[-1] == DeltaOffset(4, -1, False)


def test_offsets_bytes_limit_takes_at_least_one_file(tmp_path: Path) -> None:
    _rs_table(tmp_path, 3)
    feed = ChangeFeed(str(tmp_path), FeedOptions(max_files=None, max_bytes=1))
    end = feed.latest_offset(INITIAL, 2, limited=True)
    assert end == DeltaOffset(2, 0, True)
    assert feed.latest_offset(INITIAL, 2, limited=False) == DeltaOffset(3, -1, False)


def test_starting_version_and_timestamp(tmp_path: Path) -> None:
    _rs_table(tmp_path, 3)
    root = str(tmp_path)
    assert offsets.initial_offset(root, "1", None) == DeltaOffset(1, -1, False)
    assert offsets.initial_offset(root, "latest", None) == DeltaOffset(3, -1, False)
    stamp = DeltaTable(root).history()[0]["timestamp"]  # newest commit
    when = dt.datetime.fromtimestamp(stamp / 1000, dt.UTC).isoformat()
    assert offsets.initial_offset(root, None, when).version == 2
    feed = ChangeFeed(root, FeedOptions())
    assert _read_all(feed, DeltaOffset(1, -1, False), DeltaOffset(3, -1, False), tmp_path) == [
        2,
        3,
        4,
        5,
    ]
    with pytest.raises(ValueError, match="startingVersion"):
        offsets.initial_offset(root, "abc", None)
    with pytest.raises(ValueError, match="only one"):
        offsets.initial_offset(root, "1", "2024-01-01")


def test_deletes_fail_unless_told_how_to_treat_them(tmp_path: Path) -> None:
    _rs_table(tmp_path, 2)
    root = str(tmp_path)
    DeltaTable(root).delete("id = 0")  # rewrites a file: remove + add
    DeltaTable(root).delete("id >= 2")  # removes a whole file only
    start = DeltaOffset(1, -1, False)
    with pytest.raises(log.DeltaSourceError, match="ignoreDeletes.*ignoreChanges"):
        ChangeFeed(root, FeedOptions()).latest_offset(start, 3, limited=False)
    with pytest.raises(log.DeltaSourceError, match="updated or overwrote"):
        ChangeFeed(root, FeedOptions(ignore_deletes=True)).latest_offset(start, 3, limited=False)
    changes = ChangeFeed(root, FeedOptions(ignore_changes=True))
    assert _read_all(changes, start, DeltaOffset(4, -1, False), tmp_path) == [2, 3, 1]
    skip = ChangeFeed(root, FeedOptions(skip_change_commits=True))
    assert _read_all(skip, start, DeltaOffset(4, -1, False), tmp_path) == [2, 3]


def test_optimize_commits_are_not_new_data(tmp_path: Path) -> None:
    _rs_table(tmp_path, 3)
    root = str(tmp_path)
    DeltaTable(root).optimize.compact()
    feed = ChangeFeed(root, FeedOptions())
    end = feed.latest_offset(DeltaOffset(3, -1, False), 3, limited=True)
    assert end == DeltaOffset(4, -1, False)
    assert feed.files_between(DeltaOffset(3, -1, False), end) == []


def test_start_after_log_cleanup_uses_checkpoint(tmp_path: Path) -> None:
    _rs_table(tmp_path, 4)
    root = str(tmp_path)
    DeltaTable(root).create_checkpoint()
    for version in range(3):
        os.remove(log.commit_path(root, version))
    feed = ChangeFeed(root, FeedOptions())
    end = feed.latest_offset(INITIAL, log.latest_version(root), limited=True)
    assert sorted(_read_all(feed, INITIAL, end, tmp_path)) == list(range(8))
    with pytest.raises(log.DeltaSourceError, match="no longer in its log"):
        feed.latest_offset(DeltaOffset(1, -1, False), 3, limited=True)


def test_reader_features_lakefeed_does_not_implement_are_refused(tmp_path: Path) -> None:
    """A feature outside log.READER_FEATURES fails the open with a code naming it (here one
    written into the protocol by hand: no writer here makes an unknown one)."""
    _rs_table(tmp_path, 1)
    root = str(tmp_path)
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors", "madeUpFeature"],
        "writerFeatures": ["deletionVectors", "madeUpFeature"],
    }
    version = log.latest_version(root)
    assert version is not None
    with open(log.commit_path(root, version + 1), "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"protocol": protocol}) + "\n")
    with pytest.raises(log.DeltaSourceError) as refused:
        log.open_table(root)
    assert refused.value.code == log.READER_FEATURE
    assert "madeUpFeature" in str(refused.value) and "deletionVectors" not in str(refused.value)


def test_legacy_reader_versions_name_their_feature() -> None:
    assert log.needed_features({"minReaderVersion": 2}) == {"columnMapping"}
    assert log.needed_features({"minReaderVersion": 1}) == frozenset()
    assert log.needed_features({"minReaderVersion": 4}) == {"readerVersion4"}


def test_pruning_by_partition_and_stats(tmp_path: Path) -> None:
    for day in (1, 2, 3):
        data = pa.table(
            {
                "id": pa.array([day * 10, day * 10 + 5], pa.int64()),
                "day": [dt.date(2024, 1, day)] * 2,
            }
        )
        write_deltalake(str(tmp_path), data, mode="append", partition_by=["day"])
    actions = pa.table(DeltaTable(str(tmp_path)).get_add_actions(flatten=True))

    def count(*predicates: pruning.Predicate) -> int:
        return len(pruning.select_files(actions, predicates))

    assert count() == 3
    assert count(("=", "day", dt.date(2024, 1, 2))) == 1
    assert count(("in", "day", (dt.date(2024, 1, 2), dt.date(2024, 1, 3)))) == 2
    assert count((">", "id", 25)) == 1
    assert count(("<=", "id", 20), (">=", "id", 20)) == 1
    assert count(("isnull", "id", None)) == 0
    assert count(("isnotnull", "day", None)) == 3
    assert count(("=", "id", "not a number")) == 3  # unsure: keep


def test_after_commit_hooks_see_each_committed_batch_once(tmp_path: Path) -> None:
    seen: list[tuple[str, int]] = []
    commit.AFTER_COMMIT.append(lambda root, batch: seen.append((root, batch)))
    try:
        _stream_commit(tmp_path / "t", 0, range(3))
        _stream_commit(tmp_path / "t", 1, range(3, 5))
        _stream_commit(tmp_path / "t", 1, range(3, 5))  # a replay is skipped: no hook
    finally:
        commit.AFTER_COMMIT.clear()
    assert seen == [(str(tmp_path / "t"), 0), (str(tmp_path / "t"), 1)]


@pytest.mark.slow  # a fresh interpreter imports the engine
def test_commit_path_reads_no_kill_switch_from_the_environment(tmp_path: Path) -> None:
    """The old test-only switch, set as crash tests set it, no longer kills the committer."""
    script = (
        "import os, sys\n"
        "os.environ['LAKEFEED_TEST_KILL_AFTER_DELTA_COMMIT'] = f'*:{os.getpgid(0)}'\n"
        "from pathlib import Path\n"
        "from tests.delta.test_core import _stream_commit\n"
        "_stream_commit(Path(sys.argv[1]), 0, range(3))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "t")],
        cwd=Path(__file__).parents[2],
        start_new_session=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert DeltaTable(str(tmp_path / "t")).version() == 0


def test_expired_logs_are_looked_for_only_at_checkpoints(tmp_path: Path) -> None:
    """delta-rs would list the whole ``_delta_log`` after every commit; lakefeed's commits ask
    for the cleanup only with a checkpoint, where it can remove anything (as delta-spark)."""
    root = tmp_path / "t"
    _stream_commit(root, 0, range(3))
    DeltaTable(str(root)).alter.set_table_properties(
        {"delta.checkpointInterval": "3", "delta.logRetentionDuration": "interval 0 seconds"}
    )  # version 1
    _stream_commit(root, 1, range(3, 5))  # version 2: no checkpoint, no listing for cleanup
    assert "00000000000000000000.json" in os.listdir(root / "_delta_log")
    _stream_commit(root, 2, range(5, 7))  # version 3: a checkpoint, then the cleanup
    names = sorted(os.listdir(root / "_delta_log"))
    assert "00000000000000000000.json" not in names and any("checkpoint" in n for n in names)
    assert sorted(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == list(
        range(7)
    )


def test_commits_refuse_nulls_in_not_null_columns(tmp_path: Path) -> None:
    root = tmp_path / "t"
    id_ = pa.field("id", pa.int64(), nullable=False)
    schema = pa.schema([id_, pa.field("k", pa.string()), pa.field("v", pa.int64())])
    DeltaTable.create(str(root), schema, partition_by=["k"])
    assert _stream_commit(root, 0, range(3), partition_by=("k",)).version == 1
    spec = commit.WriteSpec(str(root), "append", ("k",))
    nulls = pa.RecordBatch.from_pydict({"id": pa.array([None], pa.int64()), "k": ["a"]})
    no_id = pa.RecordBatch.from_pydict({"k": ["a"], "v": [1]})
    for batch, message in (
        (nulls, "NOT NULL constraint violated for column 'id'"),
        (no_id, "Column id, which has a NOT NULL constraint, is missing from the data"),
    ):
        written = files.write_batches(str(root), iter([batch]), ("k",), "x-")
        with pytest.raises(SchemaMismatchError, match=message):
            commit.commit_files(spec, written, batch.schema)
    assert DeltaTable(str(root)).version() == 1
    replace = commit.WriteSpec(str(root), "overwrite", ("k",), overwrite_schema=True)
    assert commit.commit_files(replace, written, no_id.schema).version == 2  # a new schema
