"""A plain-Python model of an AUTO CDC target, and randomized change streams to check against.

The model applies every change in order, with no batches and no state table: SCD1 keeps per
key the newest row and ignores a change no newer than the newest seen (deletes included); SCD2
folds all changes of a key, sorted by sequence, into versions. Streams have duplicates,
out-of-order arrival across batches, deletes, re-inserts and nulls.
"""

from __future__ import annotations

import random
from typing import Any

from lakefeed.cdc import fold
from lakefeed.cdc.spec import END_AT, START_AT
from lakefeed.core.lakehouse import Lakehouse
from tests.support.delta import table

COLUMNS = ("id", "seq", "a", "b")  # the target's user columns (``op`` is excepted)
Change = dict[str, Any]


def changes(seed: int, keys: int = 6, per_key: int = 8, batches: int = 3) -> list[list[Change]]:
    """Change rows split into micro-batches; sequence numbers are unique per key."""
    rng = random.Random(seed)
    stream: list[tuple[float, Change]] = []
    for key in range(seed * 100, seed * 100 + keys):
        seq = 0
        for position in range(per_key):
            seq += rng.randint(1, 3)
            op = "DELETE" if rng.random() < 0.2 else "UPSERT"
            change = {
                "id": key,
                "seq": seq,
                "op": op,
                "a": None if op == "DELETE" or rng.random() < 0.3 else rng.randint(0, 3),
                "b": None if op == "DELETE" or rng.random() < 0.3 else rng.choice("xyz"),
            }
            arrival = position + rng.uniform(-3, 3)  # out of order across batches
            stream.append((arrival, change))
            if rng.random() < 0.15:  # a re-sent duplicate, maybe in another batch
                stream.append((arrival + rng.uniform(0, 4), dict(change)))
    stream.sort(key=lambda item: item[0])
    size = -(-len(stream) // batches)
    return [[c for _, c in stream[i : i + size]] for i in range(0, len(stream), size)]


def _order(change: Change) -> tuple[Any, bool]:
    return (change["seq"], change["op"] == "DELETE")


def scd1(batches: list[list[Change]], ignore_null_updates: bool = False) -> list[dict]:
    rows: dict[Any, dict] = {}
    newest: dict[Any, Any] = {}
    for batch in batches:
        for change in sorted(batch, key=_order):
            key = change["id"]
            if key in newest and change["seq"] <= newest[key]:
                continue
            newest[key] = change["seq"]
            if change["op"] == "DELETE":
                rows.pop(key, None)
                continue
            before = rows.get(key)
            rows[key] = {
                c: before[c]
                if ignore_null_updates and before is not None and change[c] is None
                else change[c]
                for c in COLUMNS
            }
    return sorted(rows.values(), key=lambda r: r["id"])


def scd2(batches: list[list[Change]], tracked: tuple[str, ...] = ("seq", "a", "b")) -> list[dict]:
    by_key: dict[Any, dict[tuple, Change]] = {}
    for change in (c for batch in batches for c in batch):
        by_key.setdefault(change["id"], {}).setdefault((change["seq"], change["op"]), change)
    versions: list[dict] = []
    for key_changes in by_key.values():
        current: dict | None = None
        for change in sorted(key_changes.values(), key=_order):
            if change["op"] == "DELETE":
                if current is not None:
                    current["__END_AT"], current = change["seq"], None
                continue
            values = {c: change[c] for c in COLUMNS}
            if current is not None and all(current[c] == values[c] for c in tracked):
                current.update(values)
                continue
            if current is not None:
                current["__END_AT"] = change["seq"]
            current = {**values, "__START_AT": change["seq"], "__END_AT": None}
            versions.append(current)
    return sorted(versions, key=lambda r: (r["id"], r["__START_AT"]))


def fold_batches(batches: list[list[dict]], rules: fold.Rules) -> list[dict]:
    """What ``lakefeed.cdc.apply`` does with Spark, on dicts: group by key, fold, upsert."""
    target: dict[tuple, dict] = {}  # (id, start) -> row
    state: dict[Any, dict] = {}
    for batch in batches:
        changes = [
            {**c, fold.OP: fold.DELETE if c["op"] == "DELETE" else fold.UPSERT, fold.SEQ: c["seq"]}
            for c in batch
        ]
        for key in {c["id"] for c in changes}:
            rows = [c for c in changes if c["id"] == key]
            rows += [{**r, fold.OP: fold.ROW} for (k, _), r in target.items() if k == key]
            rows += [{**state[key], fold.OP: fold.STATE}] if key in state else []
            for out in fold.fold(rows, rules):
                action = out.pop(fold.ACTION)
                if action == fold.STATE:
                    state[key] = out
                    continue
                at = (key, out.get(START_AT))
                if action == fold.DELETE:
                    del target[at]
                else:
                    target[at] = {c: out[c] for c in (*rules.columns, START_AT, END_AT) if c in out}
    return sorted(target.values(), key=lambda r: (r["id"], r.get(START_AT) or 0))


def rows(lakehouse: Lakehouse, name: str, order: list[str]) -> list[dict]:
    """A target's rows as the model lists them."""
    return table(lakehouse, name).sort_by([(c, "ascending") for c in order]).to_pylist()


# ---------------------------------------------------------------- AUTO CDC FROM SNAPSHOT

Snapshot = dict[int, dict]  # key -> row


def snapshots(seed: int, count: int = 5, keys: int = 8) -> list[Snapshot]:
    """Random snapshots of a keyed table: each key present with probability 0.7."""
    rng = random.Random(seed)
    return [
        {
            k: {"id": k, "a": rng.randint(0, 2), "b": rng.choice("xy")}
            for k in range(keys)
            if rng.random() < 0.7
        }
        for _ in range(count)
    ]


def snapshot_changes(snapshots: list[Snapshot]) -> list[list[dict]]:
    """The change batches of snapshots (version = position + 1), as the runtime derives them."""
    live: set[int] = set()
    batches = []
    for version, rows in enumerate(snapshots, 1):
        batch = [{**r, "seq": version, "op": "UPSERT"} for r in rows.values()]
        gone = sorted(live - rows.keys())
        batch += [{"id": k, "a": None, "b": None, "seq": version, "op": "DELETE"} for k in gone]
        live = set(rows)
        batches.append(batch)
    return batches


def snapshot_history(snapshots: list[Snapshot]) -> list[dict]:
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
