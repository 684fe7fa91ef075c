"""One key's share of a micro-batch of changes, folded into its new target rows (Spark-free).

``apply`` groups a batch by key and hands each group here, on the executors, as plain rows:
the key's changes (``op`` ``U`` upsert / ``D`` delete), its rows now in the target (``R``) and
its state row (``S``: the newest sequence applied, whether that was a delete, and every delete's
sequence). The answer is the target rows to upsert or delete and the new state row.

Rules (DLT's): changes are ordered by ``sequence_by``; at one sequence a delete comes after an
upsert. SCD type 1 keeps the newest row per key and ignores a change no newer than the newest
one applied, a delete included (a tombstone), so a late update never resurrects a deleted key.
SCD type 2 keeps a version per change of the tracked columns, ``[__START_AT, __END_AT)``; a late
change is placed into the history where its sequence belongs (the key's history is rebuilt from
its versions, the state's deletes and the new changes). ``ignore_null_updates`` keeps the
current value of a column an upsert leaves null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakefeed.cdc.spec import END_AT, START_AT

OP, SEQ, END, DELETED, DELETES, ACTION = (
    "__op",
    "__seq",
    "__end",
    "__deleted",
    "__deletes",
    "__action",
)
UPSERT, DELETE, ROW, STATE = "U", "D", "R", "S"
Row = dict[str, Any]


@dataclass(frozen=True)
class Rules:
    """What the fold needs of the flow: the target's columns and the SCD settings."""

    keys: tuple[str, ...]
    columns: tuple[str, ...]  # the target's user columns, keys included
    scd_type: int = 1
    ignore_null_updates: bool = False
    tracked: tuple[str, ...] = ()  # SCD2: a change here opens a new version
    truncate_at: Any = None  # SCD1: the newest truncate of the batch deletes every key before it


def fold(rows: Iterable[Mapping[str, Any]], rules: Rules) -> list[Row]:
    """The output rows for one key: target upserts/deletes (``__action`` U/D) and its state (S)."""
    rows = list(rows)
    changes = [dict(r) for r in rows if r[OP] in (UPSERT, DELETE) and r[SEQ] is not None]
    state = next((r for r in rows if r[OP] == STATE), None)
    current = [dict(r) for r in rows if r[OP] == ROW]
    if rules.truncate_at is not None and rows:
        changes.append({**_key(rows[0], rules), OP: DELETE, SEQ: rules.truncate_at})
    if not changes:
        return []
    if rules.scd_type == 1:
        return _scd1(changes, state, current, rules)
    return _scd2(changes, state, current, rules)


def _order(change: Mapping[str, Any]) -> tuple[Any, bool, str]:
    """By sequence, a delete after an upsert of the same sequence, then a stable tie-break (a
    replayed batch must fold the same way)."""
    return (change[SEQ], change[OP] == DELETE, repr(sorted(change.items(), key=str)))


def _key(row: Mapping[str, Any], rules: Rules) -> Row:
    return {k: row[k] for k in rules.keys}


def _values(row: Mapping[str, Any], rules: Rules) -> Row:
    return {c: row.get(c) for c in rules.columns}


def _upsert(before: Row | None, change: Mapping[str, Any], rules: Rules) -> Row:
    values = _values(change, rules)
    if before is None or not rules.ignore_null_updates:
        return values
    return {c: before[c] if v is None else v for c, v in values.items()}


def _state(key: Row, ordered: list[Row], deletes: Iterable[Any]) -> Row:
    last = ordered[-1]
    return {
        **key,
        ACTION: STATE,
        SEQ: last[SEQ],
        DELETED: last[OP] == DELETE,
        DELETES: sorted(set(deletes)),
    }


def _scd1(
    changes: list[Row], state: Mapping[str, Any] | None, current: list[Row], rules: Rules
) -> list[Row]:
    newest = state[SEQ] if state is not None else None
    fresh = sorted((c for c in changes if newest is None or c[SEQ] > newest), key=_order)
    if not fresh:
        return []
    before = _values(current[0], rules) if current else None
    row = before
    for change in fresh:
        row = None if change[OP] == DELETE else _upsert(row, change, rules)
    out: list[Row] = []
    if row is not None and row != before:
        out.append({**row, ACTION: UPSERT})
    elif row is None and before is not None:
        out.append({**before, ACTION: DELETE})
    out.append(_state(_key(fresh[0], rules), fresh, []))
    return out


def _scd2(
    changes: list[Row], state: Mapping[str, Any] | None, current: list[Row], rules: Rules
) -> list[Row]:
    key = _key(changes[0], rules)
    known = [{**v, OP: UPSERT, SEQ: v[START_AT]} for v in current]
    known += [{**key, OP: DELETE, SEQ: s} for s in (state[DELETES] if state else None) or []]
    seen = {(c[SEQ], c[OP]) for c in known}
    merged = known + [c for c in changes if (c[SEQ], c[OP]) not in seen]
    ordered = sorted(_unique(merged), key=_order)
    versions = _history(ordered, rules)
    out = _diff({v[START_AT]: v for v in current}, versions, rules)
    deletes = [c[SEQ] for c in ordered if c[OP] == DELETE]
    out.append(_state(key, ordered, deletes))
    return out


def _unique(changes: list[Row]) -> list[Row]:
    """One change per (sequence, op): the first given (the target's own versions come first)."""
    first: dict[tuple[Any, str], Row] = {}
    for change in changes:
        first.setdefault((change[SEQ], change[OP]), change)
    return list(first.values())


def _history(ordered: list[Row], rules: Rules) -> list[Row]:
    """The versions the ordered changes make: a new one when a tracked column changes."""
    versions: list[Row] = []
    open_: Row | None = None
    for change in ordered:
        if change[OP] == DELETE:
            if open_ is not None:
                open_[END_AT], open_ = change[SEQ], None
            continue
        before = _values(open_, rules) if open_ is not None else None
        values = _upsert(before, change, rules)
        if open_ is not None and all(values[c] == open_[c] for c in rules.tracked):
            open_.update(values)  # an untracked change: the version is updated in place
            continue
        if open_ is not None:
            open_[END_AT] = change[SEQ]
        open_ = {**values, START_AT: change[SEQ], END_AT: None}
        versions.append(open_)
    return versions


def _diff(before: dict[Any, Row], versions: list[Row], rules: Rules) -> list[Row]:
    """Target rows to write: versions new or changed, and old versions no longer there."""
    fields = (*rules.columns, START_AT, END_AT)
    out: list[Row] = []
    after = {v[START_AT]: v for v in versions}
    for start, old in before.items():
        if start not in after:
            out.append({**{f: old.get(f) for f in fields}, ACTION: DELETE})
    for start, version in after.items():
        was = before.get(start)
        if was is None or any(was.get(f) != version[f] for f in fields):
            out.append({**{f: version[f] for f in fields}, ACTION: UPSERT})
    return out
