"""Which columns a flow reads from its ``cloudFiles`` stream and which row filters sit on it.

Spark's Python Data Source API gives a stream reader neither: ``pushFilters`` exists only on
batch readers (pyspark 4.3) and no reader is told its required columns. lakefeed reads them
from the query's optimized logical plan instead, as Spark's file scans do (the chain of
``Filter``/``Project`` nodes right above the source, Spark's ``PhysicalOperation``): the lowest
``Project`` names the columns used, the filter conjuncts below and beside it the rows kept.

Pushed filters only drop rows early: Spark still evaluates every filter of the plan, so a
predicate here must never drop a row Spark keeps (it may keep rows Spark drops). Only
comparisons Arrow evaluates exactly as Spark are translated: a column against a literal of the
same string (binary collation), integral or boolean type. Anything else stays Spark's alone.

Spark-free: the input is the plan's ``toJSON()`` text, read in one Py4J call.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

OPERATORS = {
    "EqualTo": "eq",
    "LessThan": "lt",
    "LessThanOrEqual": "le",
    "GreaterThan": "gt",
    "GreaterThanOrEqual": "ge",
}
"""Catalyst comparisons pushed as ``(op, column, literal)``."""
FLIPPED = {"eq": "eq", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
"""The same comparison with its sides swapped (``5 < a`` is ``a > 5``)."""
INTEGRAL = {"byte", "short", "integer", "long"}
EXACT_TYPES = {"string", "boolean", *INTEGRAL}
"""Column types whose Arrow comparison equals Spark's (no NaN, collation or time zone rules)."""


@dataclass(frozen=True)
class Predicate:
    """One conjunct a row must satisfy: ``op`` in eq/lt/le/gt/ge/in/null/notnull/startswith."""

    op: str
    column: str
    value: Any = None


@dataclass(frozen=True)
class Pushdown:
    """What a stream's reader may skip: ``columns`` the flow reads (None: all of them) and
    ``filters`` every kept row satisfies (rows failing one are never built)."""

    columns: frozenset[str] | None = None
    filters: tuple[Predicate, ...] = ()
    not_pushed: tuple[str, ...] = field(default=(), compare=False)
    """Filter conjuncts left to Spark alone, by Catalyst class, for the log."""

    @property
    def prunes(self) -> bool:
        return self.columns is not None or bool(self.filters)


NONE = Pushdown()


@dataclass
class _Node:
    """A node of a Catalyst ``toJSON`` tree: its fields and its children, rebuilt."""

    fields: dict[str, Any]
    children: list[_Node]
    parent: _Node | None = None

    @property
    def kind(self) -> str:
        return str(self.fields.get("class", "")).rsplit(".", 1)[-1]


def _tree(flat: Sequence[dict[str, Any]]) -> _Node:
    """Catalyst's pre-order list (each node with ``num-children``) as a tree."""
    nodes = iter(flat)

    def build(parent: _Node | None) -> _Node:
        fields = next(nodes)
        node = _Node(fields, [], parent)
        node.children = [build(node) for _ in range(int(fields.get("num-children", 0)))]
        return node

    return build(None)


def _walk(node: _Node) -> list[_Node]:
    found = [node]
    for child in node.children:
        found.extend(_walk(child))
    return found


def _expr_id(attr: _Node) -> tuple[Any, Any] | None:
    ident = attr.fields.get("exprId")
    if attr.kind != "AttributeReference" or not isinstance(ident, dict):
        return None
    return ident.get("id"), ident.get("jvmId")


def _references(expr: _Node, ids: dict[tuple[Any, Any], str]) -> set[str]:
    """Names of the source's columns ``expr`` reads."""
    names = set()
    for node in _walk(expr):
        key = _expr_id(node)
        if key in ids:
            names.add(ids[key])
    return names


def _conjuncts(expr: _Node) -> list[_Node]:
    if expr.kind == "And":
        return [part for child in expr.children for part in _conjuncts(child)]
    return [expr]


def _literal(node: _Node, column_type: str) -> tuple[bool, Any]:
    """(True, value) when ``node`` is a non-null literal of ``column_type``."""
    if node.kind != "Literal" or node.fields.get("dataType") != column_type:
        return False, None
    value = node.fields.get("value")
    if value is None:
        return False, None
    if column_type in INTEGRAL:
        return True, int(value)
    if column_type == "boolean":
        return True, value if isinstance(value, bool) else str(value).lower() == "true"
    return True, str(value)


def _column(node: _Node, ids: dict[tuple[Any, Any], str]) -> tuple[str, str] | None:
    """(name, Spark type) when ``node`` is one of the source's columns of an exact type."""
    key = _expr_id(node)
    if key not in ids or node.fields.get("dataType") not in EXACT_TYPES:
        return None
    return ids[key], str(node.fields["dataType"])


def translate(expr: _Node, ids: dict[tuple[Any, Any], str]) -> Predicate | None:
    """``expr`` as a :class:`Predicate` Arrow evaluates exactly as Spark; None otherwise."""
    kids = expr.children
    if expr.kind in ("IsNull", "IsNotNull") and len(kids) == 1:
        key = _expr_id(kids[0])
        if key in ids:
            return Predicate("null" if expr.kind == "IsNull" else "notnull", ids[key])
        return None
    if expr.kind in OPERATORS and len(kids) == 2:
        for attr, lit, op in ((0, 1, OPERATORS[expr.kind]), (1, 0, FLIPPED[OPERATORS[expr.kind]])):
            column = _column(kids[attr], ids)
            if column is not None:
                ok, value = _literal(kids[lit], column[1])
                if ok:
                    return Predicate(op, column[0], value)
        return None
    if expr.kind == "In" and kids:
        column = _column(kids[0], ids)
        if column is None:
            return None
        values = [_literal(kid, column[1]) for kid in kids[1:]]
        if not values or not all(ok for ok, _ in values):
            return None
        return Predicate("in", column[0], tuple(value for _, value in values))
    if expr.kind == "StartsWith" and len(kids) == 2:
        column = _column(kids[0], ids)
        if column is not None and column[1] == "string":
            ok, value = _literal(kids[1], "string")
            if ok:
                return Predicate("startswith", column[0], value)
    return None


def _expression(flat: Any) -> _Node | None:
    return _tree(flat) if isinstance(flat, list) and flat else None


def _scan_chain(leaf: _Node) -> list[_Node]:
    """The ``Filter`` and ``Project`` nodes right above ``leaf``, lowest first."""
    chain = []
    node = leaf.parent
    while node is not None and node.kind in ("Filter", "Project") and len(node.children) == 1:
        chain.append(node)
        node = node.parent
    return chain


def _sources(plan: _Node, names: Sequence[str]) -> list[_Node]:
    """The plan's streaming leaves with exactly the columns ``names``."""
    found = []
    for node in _walk(plan):
        if node.kind != "StreamingExecutionRelation":
            continue
        output = [_tree(attr) for attr in node.fields.get("output") or []]
        if [attr.fields.get("name") for attr in output] == list(names):
            found.append(node)
    return found


def from_plan(plan_json: str, names: Sequence[str]) -> Pushdown:
    """The pushdown of the one source with columns ``names`` in an optimized plan's JSON;
    :data:`NONE` when the plan has no such source or several (which one is this stream's
    cannot be told from the plan, so none is narrowed)."""
    leaves = _sources(_tree(json.loads(plan_json)), names)
    if len(leaves) != 1:
        return NONE
    leaf = leaves[0]
    ids: dict[tuple[Any, Any], str] = {}
    for attr in leaf.fields.get("output") or []:
        key = _expr_id(_tree(attr))
        if key is not None:
            ids[key] = str(attr[0]["name"])
    chain = _scan_chain(leaf)
    # Spark's optimizer has pushed deterministic filters below projections already: those
    # below the lowest Project are the scan's, and what they and it read is all it needs.
    lowest = next((i for i, node in enumerate(chain) if node.kind == "Project"), None)
    below = chain if lowest is None else chain[:lowest]
    parts = [
        part
        for node in below
        if (condition := _expression(node.fields.get("condition"))) is not None
        for part in _conjuncts(condition)
    ]
    columns: frozenset[str] | None = None
    if lowest is not None:
        used = {name for part in parts for name in _references(part, ids)}
        for item in chain[lowest].fields.get("projectList") or []:
            expr = _expression(item)
            used |= _references(expr, ids) if expr is not None else set()
        columns = frozenset(used)
    translated = [(part, translate(part, ids)) for part in parts]
    return Pushdown(
        columns,
        tuple(dict.fromkeys(p for _, p in translated if p is not None)),
        tuple(part.kind for part, p in translated if p is None),
    )
