"""MERGE with deletion vectors (merge-on-read), as delta-spark does on a table with
``delta.enableDeletionVectors=true``: the target rows a MERGE updates or deletes are marked in
their files' deletion vectors, updated and inserted rows go into new files, and nothing else is
rewritten; one commit through :func:`.dv_write.commit_change` (change feed files included).
Spark-free: the join and the clauses are evaluated on Arrow.

The plan, in delta-spark's order of meaning: the ``ON`` condition's equalities between a
target and a source column (``=`` or ``<=>``) join the source with the target rows of the
files that may match (pruned by the condition's target-only terms and by the source's key
ranges, unless a ``WHEN NOT MATCHED BY SOURCE`` clause needs every row); the whole condition
then filters the pairs. Each pair takes the first ``WHEN MATCHED`` clause whose condition holds,
each unmatched source row the first ``WHEN NOT MATCHED`` clause, each unmatched target row the
first ``WHEN NOT MATCHED BY SOURCE`` clause. A target row matched by several source rows fails
the MERGE (:class:`~lakefeed.delta.errors.MergeMultipleMatchesError`) unless the only matched
clause is an unconditional delete, as in delta-spark.

Columns are named ``alias.column`` (or unqualified when only one side has the name), as exact
names; SQL is evaluated by :mod:`.predicates`. Where that does not reach (no equality between
the sides, a function, a name that only matches another case, a value that does not cast) or
:func:`.dv_write.applies` says no, :func:`merge` answers None and delta-rs's copy-on-write
MERGE runs instead, with the same rows as result.

Column-mapped tables (``name`` and ``id``) and tables with CHECK constraints, invariants or
NOT NULL columns are merged here too: conditions and values name the logical columns, files
are read and written by physical name and field id (:func:`.dv_write.write_rows`), and the rows
the MERGE writes (updated and inserted) are checked before any file is written
(:func:`.dv_write.commit_change`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyroaring import BitMap64
from sqlglot import expressions as exp

from lakefeed.delta import dv_write, generation, identity, log_writer, predicates, row_tracking
from lakefeed.delta.clauses import (
    BY_SOURCE,
    DELETES,
    INSERT_ALL,
    MATCHED,
    MATCHED_DELETE,
    MATCHED_UPDATE_ALL,
    NOT_MATCHED,
    Clause,
)
from lakefeed.delta.errors import MergeMultipleMatchesError
from lakefeed.delta.schema import table_arrow_schema

TARGET, SOURCE = "t", "s"
_SEP = "\x1f"  # between a side and a column name in the joined rows' column names
_BACKTICKED = re.compile(r"('(?:[^']|'')*')|`([^`]*)`")


@dataclass(frozen=True)
class Sides:
    """The aliases the MERGE's SQL names the target and the source by."""

    target: str
    source: str


def merge(
    table: DeltaTable,
    root: str,
    source: pa.Table,
    condition: str,
    clauses: Sequence[Clause],
    sides: Sides,
    txn: dv_write.Marks | None,
) -> dict[str, Any] | None:
    """MERGE ``source`` into ``table`` with deletion vectors (the module doc); delta-rs's
    metric names with their values, or None where this does not apply (nothing written)."""
    if not dv_write.applies(table, root):
        return None
    live = dv_write.planned_files(table, root)
    if live is None:
        return None
    version = table.version()
    schema = table_arrow_schema(table.schema())
    try:
        generated = generation.expressions(table.schema())
        allocator = identity.Allocator(identity.of_schema(table.schema()))
        sql = _Sql(sides, schema.names, source.column_names, generated, root, allocator)
        plan = _plan(table, root, live, source, sql.parse(condition), list(clauses), sql, schema)
    except predicates.Untranslatable:
        return None
    change = replace(plan.change(condition, clauses), metadata=_marks(table, allocator))
    if not change.marked and (change.new_rows is None or not change.new_rows.num_rows):
        return {**change.metrics, "num_target_files_added": 0}
    metrics = dv_write.commit_change(table, root, version, change, txn)
    added = metrics.pop("num_added_files")
    return {**metrics, "num_target_files_added": added}


def _marks(table: DeltaTable, allocator: identity.Allocator) -> dict[str, Any] | None:
    """The ``metaData`` action moving the high water marks of the identity columns the
    MERGE's inserts got values for (:mod:`.identity`); None when they got none."""
    if not allocator.last:
        return None
    text = identity.moved_schema(table.schema().to_json(), allocator.last)
    meta = table.metadata()
    columns = list(meta.partition_columns)
    return log_writer.metadata_action(table, text, dict(meta.configuration), columns)


class _Sql:
    """Parses the MERGE's SQL with its columns renamed to the joined rows' names."""

    def __init__(
        self,
        sides: Sides,
        target: list[str],
        source: list[str],
        generated: generation.Generated,
        root: str,
        identities: identity.Allocator,
    ) -> None:
        self.aliases = {sides.target.lower(): TARGET, sides.source.lower(): SOURCE}
        self.columns = {TARGET: set(target), SOURCE: set(source)}
        self.generated = generated  # the target's generated columns: the written rows get them
        self.root = root
        self.identities = identities  # values for identity columns inserts leave out

    def parse(self, text: str) -> exp.Expression:
        """The SQL ``text`` with its columns renamed, ``<=>`` kept (for :func:`_keys`)."""
        tree = predicates.parse(_BACKTICKED.sub(_double_quoted, text))
        return tree.transform(self._renamed)

    def condition(self, text: str) -> exp.Expression:
        """The SQL ``text`` as :mod:`.predicates` evaluates it."""
        return self.parse(text).transform(_null_safe)

    def _renamed(self, node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Column):
            return node
        if node.args.get("db") or node.args.get("catalog"):
            raise predicates.Untranslatable(f"nested column {node.sql()}")
        return _named_column(self._side(node), node.name)

    def _side(self, node: exp.Column) -> str:
        if node.table:
            side = self.aliases.get(node.table.lower())
            if side is None or node.name not in self.columns[side]:
                raise predicates.Untranslatable(f"no column {node.sql()}")
            return side
        found = [side for side, names in self.columns.items() if node.name in names]
        if len(found) != 1:
            raise predicates.Untranslatable(f"column {node.name!r} is ambiguous or missing")
        return found[0]


def _null_safe(node: exp.Expression) -> exp.Expression:
    """``a <=> b`` as ``(a = b OR (a IS NULL AND b IS NULL))``."""
    if not isinstance(node, exp.NullSafeEQ):
        return node
    left, right = node.this, node.expression
    both_null = exp.and_(
        exp.Is(this=left.copy(), expression=exp.Null()),
        exp.Is(this=right.copy(), expression=exp.Null()),
    )
    return exp.paren(exp.or_(exp.EQ(this=left.copy(), expression=right.copy()), both_null))


def _double_quoted(match: re.Match[str]) -> str:
    """A backticked identifier as a double-quoted one (strings stay as they are)."""
    return match.group(1) or '"' + match.group(2).replace('"', '""') + '"'


def _named_column(side: str, name: str) -> exp.Column:
    return exp.column(exp.to_identifier(f"{side}{_SEP}{name}", quoted=True))


def _named(side: str, rows: pa.Table) -> pa.Table:
    """``rows`` with each column named for ``side`` (as :class:`_Sql` renames them)."""
    return rows.rename_columns([f"{side}{_SEP}{name}" for name in rows.column_names])


@dataclass
class _Target:
    """The live target rows the MERGE may touch, with where each is."""

    files: list[tuple[dict[str, Any], pa.Table, BitMap64]]  # add, all rows, deleted rows
    rows: pa.Table  # live rows (plain names), file after file
    file: np.ndarray  # each row's index into ``files``
    position: np.ndarray  # each row's position in its data file


def _target(
    table: DeltaTable,
    root: str,
    live: dict[str, dict[str, Any]],
    conjuncts: list[tuple[str, str, Any]],
    schema: pa.Schema,
) -> _Target:
    found, parts, where, positions = [], [], [], []
    candidates = dv_write.candidate_rows(table, root, live, conjuncts, schema)
    for index, (add, rows, old) in enumerate(candidates):
        keep = np.ones(rows.num_rows, dtype=bool)
        if old:
            keep[np.fromiter(old, dtype=np.int64, count=len(old))] = False
        at = np.flatnonzero(keep)
        found.append((add, rows, old))
        parts.append(rows.take(pa.array(at)))
        where.append(np.full(len(at), index, dtype=np.int64))
        positions.append(at)
    return _Target(
        found,
        dv_write.concat(parts, schema),
        np.concatenate(where) if where else np.zeros(0, np.int64),
        np.concatenate(positions) if positions else np.zeros(0, np.int64),
    )


def _keys(tree: exp.Expression) -> list[tuple[str, str, bool]]:
    """The condition's top-level equalities between a target and a source column: (target
    column, source column, null-safe)."""
    if isinstance(tree, exp.Paren):
        return _keys(tree.this)
    if isinstance(tree, exp.And):
        return _keys(tree.this) + _keys(tree.expression)
    if isinstance(tree, (exp.EQ, exp.NullSafeEQ)):
        return [(*pair, isinstance(tree, exp.NullSafeEQ)) for pair in _pair(tree)]
    return []


def _pair(node: exp.Binary) -> list[tuple[str, str]]:
    left, right = node.this, node.expression
    if not (isinstance(left, exp.Column) and isinstance(right, exp.Column)):
        return []
    names = {left.name.split(_SEP, 1)[0]: left.name, right.name.split(_SEP, 1)[0]: right.name}
    if set(names) != {TARGET, SOURCE}:
        return []
    return [(names[TARGET], names[SOURCE])]


def _prunes(
    tree: exp.Expression, keys: list[tuple[str, str, bool]], source: pa.Table
) -> list[tuple[str, str, Any]] | None:
    """Pruning predicates for the target's files: the condition's target-only terms and each
    key's range in the source (a file outside it matches no source row); None when no target
    row can match (a key the source only has nulls of)."""
    prefix = f"{TARGET}{_SEP}"
    plain = tree.transform(
        lambda n: (
            exp.column(exp.to_identifier(n.name[len(prefix) :], quoted=True))
            if isinstance(n, exp.Column) and n.name.startswith(prefix)
            else n
        )
    ).transform(_null_safe)
    found = [p for p in predicates.conjuncts(plain) if not p[1].startswith(f"{SOURCE}{_SEP}")]
    for target, source_column, null_safe in keys:
        values = source.column(source_column.split(_SEP, 1)[1])
        if null_safe and values.null_count:
            continue
        bounds = pc.min_max(values)
        if not bounds["min"].is_valid:
            return None
        column = target.split(_SEP, 1)[1]
        found += [(">=", column, bounds["min"].as_py()), ("<=", column, bounds["max"].as_py())]
    return found


def _pairs(
    target: pa.Table, source: pa.Table, keys: list[tuple[str, str, bool]]
) -> tuple[np.ndarray, np.ndarray]:
    """The (target row, source row) pairs whose keys are equal: a hash join on each key's
    dictionary codes over both sides (so both sides' values compare as one type)."""
    left: dict[str, Any] = {}
    right: dict[str, Any] = {}
    for index, (target_column, source_column, null_safe) in enumerate(keys):
        ours, theirs = target.column(target_column), source.column(source_column)
        try:
            theirs = theirs.cast(ours.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            raise predicates.Untranslatable(str(error)) from None
        both = pa.chunked_array(ours.chunks + theirs.chunks, ours.type).combine_chunks()
        codes = pc.dictionary_encode(both, null_encoding="encode" if null_safe else "mask")
        left[f"k{index}"] = codes.indices[: len(ours)]
        right[f"k{index}"] = codes.indices[len(ours) :]
    left["__target"] = pa.array(np.arange(target.num_rows, dtype=np.int64))
    right["__source"] = pa.array(np.arange(source.num_rows, dtype=np.int64))
    key_names = [k for k in left if k[0] == "k"]
    joined = pa.table(left).join(pa.table(right), keys=key_names, join_type="inner")
    return (
        joined.column("__target").to_numpy().astype(np.int64),
        joined.column("__source").to_numpy().astype(np.int64),
    )


def _holds(sql: _Sql, text: str | None, rows: pa.Table) -> np.ndarray:
    """Where the clause condition ``text`` holds on ``rows`` (everywhere without one)."""
    if text is None:
        return np.ones(rows.num_rows, dtype=bool)
    return _true(sql.condition(text), rows)


def _true(tree: exp.Expression, rows: pa.Table) -> np.ndarray:
    return np.asarray(predicates.matches(tree, rows).to_numpy(zero_copy_only=False), dtype=bool)


def _first_clause(sql: _Sql, clauses: list[Clause], rows: pa.Table) -> np.ndarray:
    """For each row, the index in ``clauses`` of the first whose condition holds (-1: none)."""
    chosen = np.full(rows.num_rows, -1, dtype=np.int64)
    for index, clause in enumerate(clauses):
        free = chosen == -1
        if not free.any():
            break
        chosen[free & _holds(sql, clause.predicate, rows)] = index
    return chosen


def _values(
    sql: _Sql, clause: Clause, rows: pa.Table, base: pa.Table | None, schema: pa.Schema
) -> pa.Table:
    """The rows a clause writes: ``base`` (the target rows it updates; None for an insert,
    whose unnamed columns are null) with the clause's values set, evaluated on ``rows``, and
    the target's generated columns computed or checked (:mod:`.generation`; a ``*_ALL``
    clause computes those the source lacks)."""
    if clause.kind in (MATCHED_UPDATE_ALL, INSERT_ALL):
        computed = {name for name, _ in sql.generated} | set(sql.identities.columns)
        present = [name for name in schema.names if name in sql.columns[SOURCE]]
        missing = [n for n in schema.names if n not in present and n not in computed]
        if missing:
            raise predicates.Untranslatable(f"the source has no column {missing[0]!r}")
        values: dict[str, exp.Expression] = {n: _named_column(SOURCE, n) for n in present}
    else:
        given = (clause.values or {}).items()
        values = {_unquoted(name): sql.condition(text) for name, text in given}
    out = base if base is not None else _nulls(schema, rows.num_rows)
    for name, tree in values.items():
        if name not in schema.names:
            raise predicates.Untranslatable(f"no column {name!r}")
        value = predicates.evaluate(tree, rows)
        field = schema.field(name)  # the table's field: its nullability kept for concat
        column = dv_write.cast(value, rows.num_rows, field)
        out = out.set_column(schema.get_field_index(name), field, column)
    if clause.kind in NOT_MATCHED:
        out = sql.identities.filled(out, values)
    return generation.regenerate(out, list(values), sql.generated, sql.root)


def _unquoted(name: str) -> str:
    """A target column as a clause's values name it (``name`` or ```name```)."""
    if len(name) > 1 and name[0] == name[-1] == "`":
        return name[1:-1].replace("``", "`")
    return name


def _nulls(schema: pa.Schema, count: int) -> pa.Table:
    return pa.table([pa.nulls(count, f.type) for f in schema], schema=schema)


@dataclass
class _Outcome:
    """Target rows deleted and updated (indices into the target rows), and new rows."""

    deleted: list[np.ndarray]
    updated: list[np.ndarray]
    postimages: list[pa.Table]
    inserted: list[pa.Table]
    matched_updates: int = 0
    by_source_updates: int = 0
    matched_deletes: int = 0
    by_source_deletes: int = 0


def _apply(
    sql: _Sql,
    clauses: list[Clause],
    rows: pa.Table,
    indices: np.ndarray,
    base: pa.Table | None,
    schema: pa.Schema,
) -> Iterator[tuple[Clause, np.ndarray, pa.Table | None]]:
    """Each clause with the ``indices`` of the ``rows`` it takes and, for an update or insert,
    the rows it writes (``base``: the target rows, for updates)."""
    chosen = _first_clause(sql, clauses, rows)
    for index, clause in enumerate(clauses):
        taken = np.flatnonzero(chosen == index)
        if not len(taken):
            continue
        if clause.kind in DELETES:
            yield clause, indices[taken], None
            continue
        picked = pa.array(taken)
        start = None if base is None else base.take(picked)
        yield clause, indices[taken], _values(sql, clause, rows.take(picked), start, schema)


@dataclass
class _Plan:
    target: _Target
    source_rows: int
    outcome: _Outcome
    schema: pa.Schema
    root: str
    tracked: row_tracking.Materialized | None  # :func:`.dv_write.tracked`

    def change(self, condition: str, clauses: Sequence[Clause]) -> dv_write.Change:
        target, outcome = self.target, self.outcome
        gone = _merged(outcome.deleted)
        changed = _merged(outcome.updated)
        marked = []
        hit = np.concatenate([gone, changed])
        for index, (add, rows, old) in enumerate(target.files):
            mine = hit[target.file[hit] == index]
            mark = dv_write.mark_rows(add, rows, old, target.position[mine])
            if mark is not None:
                marked.append(mark)
        inserted = dv_write.concat(outcome.inserted, self.schema)
        after = dv_write.concat(outcome.postimages, self.schema)
        feed = {
            "delete": target.rows.take(pa.array(gone)),
            "update_preimage": target.rows.take(pa.array(changed)),
            "update_postimage": after,
            "insert": inserted,
        }
        metrics, log_metrics = self._metrics(marked, len(gone), len(changed), inserted.num_rows)
        parameters = {"predicate": json.dumps([condition]), **_clause_parameters(clauses)}
        new_rows = dv_write.concat([after, inserted], self.schema)
        ids = self._ids(inserted.num_rows)
        return dv_write.Change(
            "MERGE", parameters, metrics, log_metrics, marked, new_rows, feed, ids
        )

    def _ids(self, inserted: int) -> pa.Array | None:
        """The new rows' ids where the table materializes them: an updated row's own, in
        the order of its postimage; null (fresh) for an inserted row."""
        if self.tracked is None:
            return None
        target = self.target
        moved = np.concatenate(self.outcome.updated) if self.outcome.updated else np.zeros(0, int)
        adds = [add for add, _, _ in target.files]
        which, positions = target.file[moved], target.position[moved]
        kept = row_tracking.stable_ids(self.root, adds, which, positions, self.tracked.row_id)
        return pa.concat_arrays([kept, pa.nulls(inserted, pa.int64())])

    def _metrics(
        self, marked: list[dv_write.Marked], deleted: int, updated: int, inserted: int
    ) -> tuple[dict[str, Any], dict[str, str]]:
        emptied = sum(1 for m in marked if len(m.rows) >= m.records)
        o = self.outcome
        metrics = {
            "num_source_rows": self.source_rows,
            "num_target_rows_inserted": inserted,
            "num_target_rows_updated": updated,
            "num_target_rows_deleted": deleted,
            "num_target_rows_copied": 0,
            "num_output_rows": inserted + updated,
            "num_target_files_removed": emptied,
            "num_deletion_vectors_added": len(marked) - emptied,
        }
        log_metrics = {
            "numSourceRows": self.source_rows,
            "numTargetRowsInserted": inserted,
            "numTargetRowsUpdated": updated,
            "numTargetRowsMatchedUpdated": o.matched_updates,
            "numTargetRowsNotMatchedBySourceUpdated": o.by_source_updates,
            "numTargetRowsDeleted": deleted,
            "numTargetRowsMatchedDeleted": o.matched_deletes,
            "numTargetRowsNotMatchedBySourceDeleted": o.by_source_deletes,
            "numTargetRowsCopied": 0,
            "numOutputRows": inserted + updated,
            "numTargetFilesRemoved": emptied,
            "numTargetDeletionVectorsAdded": len(marked) - emptied,
        }
        return metrics, {key: str(value) for key, value in log_metrics.items()}


def _merged(parts: list[np.ndarray]) -> np.ndarray:
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


def _clause_parameters(clauses: Sequence[Clause]) -> dict[str, str]:
    """delta-spark's ``matchedPredicates`` / ``notMatchedPredicates`` /
    ``notMatchedBySourcePredicates``: each clause's action and condition, in order."""
    groups = {"matchedPredicates": MATCHED, "notMatchedPredicates": NOT_MATCHED}
    groups["notMatchedBySourcePredicates"] = BY_SOURCE
    out = {}
    for name, kinds in groups.items():
        listed = []
        for clause in clauses:
            if clause.kind in kinds:
                action = "delete" if clause.kind in DELETES else "update"
                action = "insert" if clause.kind in NOT_MATCHED else action
                entry = {"actionType": action}
                if clause.predicate:
                    entry["predicate"] = clause.predicate
                listed.append(entry)
        out[name] = json.dumps(listed)
    return out


def _plan(
    table: DeltaTable,
    root: str,
    live: dict[str, dict[str, Any]],
    source: pa.Table,
    tree: exp.Expression,
    clauses: Sequence[Clause],
    sql: _Sql,
    schema: pa.Schema,
) -> _Plan:
    keys = _keys(tree)
    if not keys:
        raise predicates.Untranslatable("no equality between a target and a source column")
    by_source = [c for c in clauses if c.kind in BY_SOURCE]
    prunes = [] if by_source else _prunes(tree, keys, source)
    reachable = live if prunes is not None else {}
    target = _target(table, root, reachable, prunes or [], schema)
    ours, theirs = _named(TARGET, target.rows), _named(SOURCE, source)
    left, right = _pairs(ours, theirs, keys)
    joined = _side_by_side(ours.take(pa.array(left)), theirs.take(pa.array(right)))
    kept = _true(tree.transform(_null_safe), joined)
    left, right, joined = left[kept], right[kept], joined.filter(pa.array(kept))
    matched = [c for c in clauses if c.kind in MATCHED]
    _refuse_multiple_matches(left, matched)
    outcome = _Outcome([], [], [], [])
    base = target.rows.take(pa.array(left))
    _collect(outcome, _apply(sql, matched, joined, left, base, schema), by_source=False)
    unmatched_source = _others(source.num_rows, right)
    inserts = [c for c in clauses if c.kind in NOT_MATCHED]
    picked = theirs.take(pa.array(unmatched_source))
    _collect(outcome, _apply(sql, inserts, picked, unmatched_source, None, schema), False)
    unmatched_target = _others(target.rows.num_rows, left)
    picked = ours.take(pa.array(unmatched_target))
    base = target.rows.take(pa.array(unmatched_target))
    _collect(outcome, _apply(sql, by_source, picked, unmatched_target, base, schema), True)
    tracked = dv_write.tracked(table, root)
    return _Plan(target, source.num_rows, outcome, schema, root, tracked)


def _others(count: int, taken: np.ndarray) -> np.ndarray:
    """The indices below ``count`` not in ``taken``, in order (a mask: ``np.setdiff1d`` sorts
    and hashes the whole range, seconds for a million target rows)."""
    free = np.ones(count, dtype=bool)
    free[taken] = False
    return np.flatnonzero(free)


def _side_by_side(target: pa.Table, source: pa.Table) -> pa.Table:
    columns = target.columns + source.columns
    return pa.table(columns, names=target.column_names + source.column_names)


def _refuse_multiple_matches(left: np.ndarray, matched: list[Clause]) -> None:
    """delta-spark's rule: a target row matched by several source rows is an error when a
    matched clause may change it (one unconditional delete may not: it deletes either way)."""
    if not matched or len(np.unique(left)) == len(left):
        return
    if len(matched) == 1 and matched[0].kind == MATCHED_DELETE and matched[0].predicate is None:
        return
    raise MergeMultipleMatchesError(
        "the MERGE source has several rows matching one target row, which a matched clause "
        "updates or deletes",
        fix="deduplicate the source on the merge keys (e.g. keep the latest row per key)",
    )


def _collect(
    outcome: _Outcome,
    taken: Iterator[tuple[Clause, np.ndarray, pa.Table | None]],
    by_source: bool,
) -> None:
    for clause, indices, rows in taken:
        if clause.kind in NOT_MATCHED:
            assert rows is not None
            outcome.inserted.append(rows)
        elif rows is None:
            outcome.deleted.append(indices)
            if by_source:
                outcome.by_source_deletes += len(indices)
            else:
                outcome.matched_deletes += len(indices)
        else:
            outcome.updated.append(indices)
            outcome.postimages.append(rows)
            if by_source:
                outcome.by_source_updates += len(indices)
            else:
                outcome.matched_updates += len(indices)
