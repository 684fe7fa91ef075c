"""A row predicate in SQL text (the DataFusion SQL lakefeed's DELETE takes) evaluated on Arrow
rows, Spark-free: the rows of one data file a deletion vector must mark.

Only the plain forms are translated (columns, literals, comparisons, ``AND``/``OR``/``NOT``,
``IS [NOT] NULL``, ``IN``, ``BETWEEN``, arithmetic), with SQL's three-valued logic (a null
condition deletes nothing). Anything else, or a comparison Arrow cannot make between the types
at hand, is :class:`Untranslatable`: the caller then lets delta-rs (DataFusion) do the whole
DELETE, which rewrites files instead, with the same result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import expressions as exp


class Untranslatable(Exception):
    """The predicate uses SQL this module does not evaluate; delta-rs's DELETE runs instead."""


_BINARY: dict[type[exp.Expression], Callable[[Any, Any], Any]] = {
    exp.EQ: pc.equal,
    exp.NEQ: pc.not_equal,
    exp.GT: pc.greater,
    exp.GTE: pc.greater_equal,
    exp.LT: pc.less,
    exp.LTE: pc.less_equal,
    exp.And: pc.and_kleene,
    exp.Or: pc.or_kleene,
    exp.Add: pc.add_checked,
    exp.Sub: pc.subtract_checked,
    exp.Mul: pc.multiply_checked,
}


def parse(text: str) -> exp.Expression:
    """The predicate's syntax tree (refused as :class:`Untranslatable` when it does not parse)."""
    try:
        tree = sqlglot.parse_one(text)
    except sqlglot.errors.ParseError as error:
        raise Untranslatable(str(error)) from None
    if not isinstance(tree, exp.Expression):
        raise Untranslatable(f"{text!r} is not an expression")
    return tree


_PRUNABLE: dict[type[exp.Expression], str] = {
    exp.EQ: "=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
}


def conjuncts(tree: exp.Expression) -> list[tuple[str, str, Any]]:
    """The top-level ``AND`` terms of the predicate that name a column and literals, as
    :mod:`lakefeed.delta.pruning`'s ``(op, column, value)``: a file whose partition values or
    statistics fail one holds no matching row. Other terms are left out (they prune
    nothing)."""
    if isinstance(tree, exp.Paren):
        return conjuncts(tree.this)
    if isinstance(tree, exp.And):
        return conjuncts(tree.this) + conjuncts(tree.expression)
    column = tree.this if isinstance(tree.this, exp.Column) and not tree.this.table else None
    if column is None:
        return []
    if type(tree) in _PRUNABLE and isinstance(tree.expression, (exp.Literal, exp.Boolean)):
        return [(_PRUNABLE[type(tree)], column.name, _literal(tree.expression).as_py())]
    if isinstance(tree, exp.In) and all(isinstance(e, exp.Literal) for e in tree.expressions):
        return [("in", column.name, tuple(_literal(e).as_py() for e in tree.expressions))]
    if isinstance(tree, exp.Is) and isinstance(tree.expression, exp.Null):
        return [("isnull", column.name, None)]
    return []


def evaluate(tree: exp.Expression, rows: pa.Table) -> Any:
    """The expression's value for each of ``rows`` (an array, or a scalar for a constant)."""
    try:
        return _evaluate(tree, rows)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise Untranslatable(str(error)) from None


def matches(tree: exp.Expression, rows: pa.Table) -> pa.Array:
    """Which of ``rows`` the predicate holds for (a null result counts as not)."""
    result = evaluate(tree, rows)
    if isinstance(result, pa.Scalar):
        result = pa.repeat(result, rows.num_rows)
    if isinstance(result, pa.ChunkedArray):
        result = result.combine_chunks()
    if not pa.types.is_boolean(result.type):
        raise Untranslatable(f"the predicate is a {result.type}, not a condition")
    return pc.fill_null(result, False)


def _evaluate(node: exp.Expression, rows: pa.Table) -> Any:
    if isinstance(node, exp.Paren):
        return _evaluate(node.this, rows)
    if isinstance(node, exp.Column):
        return _column(node, rows)
    if isinstance(node, (exp.Literal, exp.Boolean, exp.Null)):
        return _literal(node)
    if isinstance(node, exp.Not):
        return pc.invert(_evaluate(node.this, rows))
    if isinstance(node, exp.Neg):
        return pc.negate_checked(_evaluate(node.this, rows))
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return pc.is_null(_evaluate(node.this, rows))
    if isinstance(node, exp.In) and node.expressions and not node.args.get("query"):
        return _in(node, rows)
    if isinstance(node, exp.Between):
        value = _evaluate(node.this, rows)
        low, high = _evaluate(node.args["low"], rows), _evaluate(node.args["high"], rows)
        return pc.and_kleene(pc.greater_equal(value, low), pc.less_equal(value, high))
    operation = _BINARY.get(type(node))
    if operation is None:
        raise Untranslatable(f"{node.key} is not evaluated on Arrow")
    return operation(_evaluate(node.this, rows), _evaluate(node.expression, rows))


def _in(node: exp.In, rows: pa.Table) -> Any:
    """``x IN (a, b)`` as ``x = a OR x = b``: SQL's nulls (no match and a null in the list is
    null, not false) come with it."""
    value = _evaluate(node.this, rows)
    result = None
    for option in node.expressions:
        equal = pc.equal(value, _evaluate(option, rows))
        result = equal if result is None else pc.or_kleene(result, equal)
    return result


def _column(node: exp.Column, rows: pa.Table) -> pa.ChunkedArray:
    if node.table or node.args.get("db"):
        raise Untranslatable(f"qualified column {node.sql()}")
    name = node.name
    if name not in rows.column_names:
        raise Untranslatable(f"no column {name!r}")  # delta-rs names the error
    return rows.column(name)


def _literal(node: exp.Expression) -> pa.Scalar:
    if isinstance(node, exp.Null):
        return pa.scalar(None)
    if isinstance(node, exp.Boolean):
        return pa.scalar(bool(node.this))
    assert isinstance(node, exp.Literal)
    if node.is_string:
        return pa.scalar(node.this)
    text = str(node.this)
    try:
        return pa.scalar(int(text))
    except ValueError:
        return pa.scalar(float(text))
