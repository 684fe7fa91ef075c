"""AUTO CDC FROM SNAPSHOT without Spark: random snapshot sequences, turned into change rows by
the rule :func:`lakefeed.cdc.snapshot.changes` applies (every row an upsert at the version, a
delete for each key live before and missing now) and folded as the runtime folds them, against
targets computed straight from the snapshots."""

from __future__ import annotations

import random

import pytest

from lakefeed.cdc import fold
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


@pytest.mark.parametrize(
    ("answer", "latest", "why"),
    [
        ((None, "2026-01-01"), None, "is not an integer"),
        ((None, 2), 2, "is not newer than 2"),
        ([None, 3], None, "returned list"),
    ],
)
def test_a_wrong_snapshot_answer_is_refused(answer: object, latest: int | None, why: str) -> None:
    snapshots = Snapshots(lambda _latest: answer)
    with pytest.raises(PipelineDefinitionError, match=why) as refused:
        snapshots.next(latest)
    assert refused.value.code == "CDC_INVALID"
