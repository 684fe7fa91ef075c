"""The per-key fold, run batch by batch as the runtime runs it, against the plain model (no
Spark: many seeds in milliseconds)."""

from __future__ import annotations

import pytest

from lakefeed.cdc import fold
from lakefeed.cdc.spec import END_AT, START_AT
from tests.cdc import model

SEEDS = range(40)


@pytest.mark.parametrize("ignore_null_updates", [False, True])
def test_scd1_matches_the_model(ignore_null_updates: bool) -> None:
    rules = fold.Rules(("id",), model.COLUMNS, 1, ignore_null_updates)
    for seed in SEEDS:
        batches = model.changes(seed)
        assert model.fold_batches(batches, rules) == model.scd1(batches, ignore_null_updates), seed


def test_scd2_matches_the_model() -> None:
    rules = fold.Rules(("id",), model.COLUMNS, 2, tracked=("seq", "a", "b"))
    for seed in SEEDS:
        batches = model.changes(seed)
        assert model.fold_batches(batches, rules) == model.scd2(batches), seed


def test_scd2_untracked_changes_update_the_version_in_place() -> None:
    rules = fold.Rules(("id",), model.COLUMNS, 2, tracked=("a",))
    batches = [
        [{"id": 1, "seq": 1, "op": "UPSERT", "a": 1, "b": "x"}],
        [{"id": 1, "seq": 2, "op": "UPSERT", "a": 1, "b": "y"}],  # b only: same version
        [{"id": 1, "seq": 3, "op": "UPSERT", "a": 2, "b": "y"}],  # a: a new version
    ]
    assert model.fold_batches(batches, rules) == model.scd2(batches, tracked=("a",))
    assert [(r["b"], r[START_AT], r[END_AT]) for r in model.fold_batches(batches, rules)] == [
        ("y", 1, 3),
        ("y", 3, None),
    ]


def test_a_truncate_deletes_every_key_before_it() -> None:
    rules = fold.Rules(("id",), model.COLUMNS, 1, truncate_at=5)
    row = {"id": 1, "seq": 3, "a": 1, "b": "x"}
    out = fold.fold([{**row, fold.OP: fold.ROW, fold.SEQ: None}], rules)
    assert [o[fold.ACTION] for o in out] == [fold.DELETE, fold.STATE]
    later = {**row, "seq": 7, fold.OP: fold.UPSERT, fold.SEQ: 7}
    out = fold.fold([{**row, fold.OP: fold.ROW, fold.SEQ: None}, later], rules)
    assert out[0] == {**row, "seq": 7, fold.ACTION: fold.UPSERT}
