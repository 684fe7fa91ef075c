"""AUTO CDC FROM SNAPSHOT without Spark: random snapshot sequences, turned into change rows by
the rule :func:`lakefeed.cdc.snapshot.changes` applies (every row an upsert at the version, a
delete for each key live before and missing now) and folded as the runtime folds them, against
targets computed straight from the snapshots."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from lakefeed.cdc import fold
from lakefeed.cdc import snapshot as snap
from lakefeed.cdc.snapshot import Snapshots
from lakefeed.core.errors import PipelineDefinitionError
from tests.cdc import model


def test_scd1_target_is_the_newest_snapshot() -> None:
    rules = fold.Rules(keys=("id",), columns=("id", "a", "b"))
    for seed in range(100):
        snapshots = model.snapshots(seed)
        newest = [snapshots[-1][k] for k in sorted(snapshots[-1])]
        assert model.fold_batches(model.snapshot_changes(snapshots), rules) == newest, seed


def test_scd2_target_has_a_version_per_change_between_snapshots() -> None:
    rules = fold.Rules(keys=("id",), columns=("id", "a", "b"), scd_type=2, tracked=("a", "b"))
    for seed in range(100):
        snapshots = model.snapshots(seed)
        changes = model.snapshot_changes(snapshots)
        assert model.fold_batches(changes, rules) == model.snapshot_history(snapshots), seed


def test_an_unchanged_snapshot_changes_nothing() -> None:
    rules = fold.Rules(keys=("id",), columns=("id", "a", "b"), scd_type=2, tracked=("a", "b"))
    snapshots = model.snapshots(3)
    repeated = [*snapshots, snapshots[-1], snapshots[-1]]
    changes = model.snapshot_changes(repeated)
    assert model.fold_batches(changes, rules) == model.snapshot_history(snapshots)


_T1 = dt.datetime(2026, 1, 1, 12, 0, 0, 250, tzinfo=dt.UTC)
_T2 = dt.datetime(2026, 1, 2, 8, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))


@pytest.mark.parametrize(
    ("answer", "latest", "why"),
    [
        ((None, "2026-01-01"), None, "neither an integer nor a timestamp"),
        ((None, True), None, "neither an integer nor a timestamp"),
        ((None, 2), 2, "is not newer than 2"),
        ([None, 3], None, "returned list"),
        (
            (None, _T1),
            3,
            "is of type timestamp, but the versions applied so far are of type integer",
        ),
        ((None, 4), _T1, "is of type integer, but"),
        ((None, _T1.replace(tzinfo=None)), _T1, "of type timestamp without time zone, but"),
        ((None, _T1), _T1, "is not newer than"),
    ],
)
def test_a_wrong_snapshot_answer_is_refused(answer: object, latest: object, why: str) -> None:
    snapshots = Snapshots(lambda _latest: answer)
    with pytest.raises(PipelineDefinitionError, match=why) as refused:
        snapshots.next(latest)
    assert refused.value.code == "CDC_INVALID"


def test_timestamp_versions_are_accepted_newer_and_of_one_kind() -> None:
    frame = object()
    assert Snapshots(lambda _latest: (frame, _T2)).next(_T1) == (frame, _T2)
    naive = _T1.replace(tzinfo=None)
    assert Snapshots(lambda _latest: (frame, naive)).next(None) == (frame, naive)


@pytest.mark.parametrize(
    "version", [0, 7, 2**40, _T1, _T2, _T1.replace(tzinfo=None), dt.datetime(1969, 12, 31, 23)]
)
def test_a_version_survives_the_txn_round_trip(version: snap.SnapshotVersion) -> None:
    """A txn version is a long: timestamps travel as microseconds, kind by the app id."""
    kind = snap.kind_of(version)
    assert kind is not None
    back = snap.from_txn(kind, snap.txn_version(version))
    assert back == version and type(back) is type(version)
    assert (getattr(back, "tzinfo", None) is None) == (getattr(version, "tzinfo", None) is None)


def test_txn_versions_keep_the_timestamps_order() -> None:
    times = sorted([_T1, _T2, _T1 + dt.timedelta(microseconds=1), _T1 - dt.timedelta(days=400)])
    assert sorted(times, key=snap.txn_version) == times


def test_the_latest_version_comes_back_in_its_kind(tmp_path: Path) -> None:
    """What a rerun hands the snapshot function: the state table's txn, under the app id of the
    versions' kind, turned back into a datetime (delta-rs only, no Spark)."""
    from deltalake import write_deltalake
    from deltalake.transaction import CommitProperties, Transaction

    state = tmp_path / "state"
    cdc = snap.declare("test", "source_fn", keys=["id"])
    apply = snap.ApplySnapshots(cdc, Snapshots(lambda _: None), "", str(state), "app")
    assert apply.latest() is None  # no state table yet
    txn = Transaction("app" + snap.TIMESTAMP.suffix, snap.txn_version(_T2))
    write_deltalake(
        str(state),
        pa.table({"id": [1]}),
        commit_properties=CommitProperties(app_transactions=[txn]),
    )
    assert apply.latest() == _T2 and apply.latest().tzinfo is not None
