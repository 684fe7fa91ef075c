"""SQL predicates evaluated on Arrow rows (what a DELETE with deletion vectors marks), with
SQL's three-valued logic; what is not translated is refused, for delta-rs to run instead."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakefeed.delta import predicates

ROWS = pa.table({"id": [1, 2, 3, None], "name": ["a", "b", None, "d"], "x": [1.5, 2.5, 3.5, 4.5]})


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("id = 2", [False, True, False, False]),
        ("id <> 2", [True, False, True, False]),  # null <> 2 is null: not deleted
        ("NOT id = 2", [True, False, True, False]),
        ("id IN (1, 3)", [True, False, True, False]),
        ("id IN (1, NULL)", [True, False, False, False]),
        ("id IS NULL", [False, False, False, True]),
        ("name IS NOT NULL AND id > 1", [False, True, False, False]),
        ("id BETWEEN 2 AND 3 OR name = 'd'", [False, True, True, True]),
        ("x * 2 >= 7", [False, False, True, True]),
        ("(id + 1) = -(-3)", [False, True, False, False]),
        ("true", [True, True, True, True]),
    ],
)
def test_predicates_follow_sql(text: str, kept: list[bool]) -> None:
    assert predicates.matches(predicates.parse(text), ROWS).to_pylist() == kept


@pytest.mark.parametrize(
    "text",
    ["name LIKE 'a%'", "upper(name) = 'A'", "t.id = 1", "missing = 1", "id = 'x' ||", "id + 1"],
)
def test_what_is_not_translated_is_refused(text: str) -> None:
    with pytest.raises(predicates.Untranslatable):
        predicates.matches(predicates.parse(text), ROWS)


def test_conjuncts_are_what_file_skipping_can_use() -> None:
    tree = predicates.parse("part = 6 AND (id > 3 AND name IS NULL) AND (id = 1 OR id = 2)")
    assert predicates.conjuncts(tree) == [
        ("=", "part", 6),
        (">", "id", 3),
        ("isnull", "name", None),
    ]
    assert predicates.conjuncts(predicates.parse("id IN (1, 2)")) == [("in", "id", (1, 2))]
    assert predicates.conjuncts(predicates.parse("NOT id = 1 OR 1 = id")) == []
