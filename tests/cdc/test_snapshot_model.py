"""AUTO CDC FROM SNAPSHOT without Spark: random snapshot sequences, turned into change rows by
the rule :func:`lakefeed.cdc.snapshot.changes` applies (every row an upsert at the version, a
delete for each key live before and missing now) and folded as the runtime folds them, against
targets computed straight from the snapshots."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pyarrow as pa
import pytest

from lakefeed.cdc import fold
from lakefeed.cdc import snapshot as snap
from lakefeed.cdc.snapshot import Snapshots
from lakefeed.cdc.spec import END_AT, START_AT
from lakefeed.errors import PipelineDefinitionError
from tests.cdc import model

Snapshot = dict[int, dict]  # key -> row


def _snapshots(seed: int, count: int = 5, keys: int = 8) -> list[Snapshot]:
    rng = random.Random(seed)
    return [
        {
            k: {"id": k, "a": rng.randint(0, 2), "b": rng.choice("xy")}
            for k in range(keys)
            if rng.random() < 0.7
        }
        for _ in range(count)
    ]


def _changes(snapshots: list[Snapshot]) -> list[list[dict]]:
    """The change batches, one per snapshot (version = position + 1)."""
    live: set[int] = set()
    batches = []
    for version, rows in enumerate(snapshots, 1):
        batch = [{**r, "seq": version, "op": "UPSERT"} for r in rows.values()]
        gone = sorted(live - rows.keys())
        batch += [{"id": k, "a": None, "b": None, "seq": version, "op": "DELETE"} for k in gone]
        live = set(rows)
        batches.append(batch)
    return batches


def _history(snapshots: list[Snapshot]) -> list[dict]:
    """SCD2 from the snapshots: a version opens when a key appears or its values change, and
    closes at the first snapshot that lacks or changes it."""
    versions: list[dict] = []
    open_: dict[int, dict] = {}
    for version, rows in enumerate(snapshots, 1):
        for key in list(open_):
            row = rows.get(key)
            if row is None or (row["a"], row["b"]) != (open_[key]["a"], open_[key]["b"]):
                open_.pop(key)[END_AT] = version
        for key, row in rows.items():
            if key not in open_:
                open_[key] = {**row, START_AT: version, END_AT: None}
                versions.append(open_[key])
    return sorted(versions, key=lambda r: (r["id"], r[START_AT]))


def test_scd1_target_is_the_newest_snapshot() -> None:
    rules = fold.Rules(keys=("id",), columns=("id", "a", "b"))
    for seed in range(100):
        snapshots = _snapshots(seed)
        newest = [snapshots[-1][k] for k in sorted(snapshots[-1])]
        assert model.fold_batches(_changes(snapshots), rules) == newest, seed


def test_scd2_target_has_a_version_per_change_between_snapshots() -> None:
    rules = fold.Rules(keys=("id",), columns=("id", "a", "b"), scd_type=2, tracked=("a", "b"))
    for seed in range(100):
        snapshots = _snapshots(seed)
        assert model.fold_batches(_changes(snapshots), rules) == _history(snapshots), seed


def test_an_unchanged_snapshot_changes_nothing() -> None:
    rules = fold.Rules(keys=("id",), columns=("id", "a", "b"), scd_type=2, tracked=("a", "b"))
    snapshots = _snapshots(3)
    repeated = [*snapshots, snapshots[-1], snapshots[-1]]
    assert model.fold_batches(_changes(repeated), rules) == _history(snapshots)


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
