"""A table's column list as ``CREATE TABLE`` takes it: columns and table constraints, Spark-free.

Read by lakefeed's hand grammar (:class:`~lakefeed.sql.grammar.Cursor`) since the column list
is Delta's and Databricks' (``GENERATED ALWAYS AS``, ``CONSTRAINT ... CHECK``, informational
keys) more than Spark's. Two readers use it: a pipeline table's declared schema (DLT's and
SDP's ``schema=`` string, :mod:`lakefeed.pipeline.table_schema`) and Delta SQL's
``CREATE TABLE`` (:mod:`lakefeed.compat.delta_spark.sql.parse`, with its own cursor's errors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lakefeed.sql.grammar import Cursor
from lakefeed.sql.tokens import tokens


@dataclass(frozen=True)
class Identity:
    """``GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY [(START WITH n INCREMENT BY m)]``."""

    start: int = 1
    step: int = 1
    always: bool = True


@dataclass
class Column:
    name: str
    type: str
    nullable: bool = True
    generated: str | None = None
    comment: str | None = None
    identity: Identity | None = None


@dataclass(frozen=True)
class TableConstraint:
    """A table constraint of a column list: ``[CONSTRAINT name] CHECK (expr)`` (Delta's CHECK
    constraint, ``delta.constraints.<name>``), or ``PRIMARY KEY`` / ``FOREIGN KEY`` (Unity
    Catalog's informational constraints: declared, never enforced)."""

    name: str | None
    kind: Literal["CHECK", "PRIMARY KEY", "FOREIGN KEY"]
    text: str  # the CHECK's expression, or the key's definition as written


_COLUMN_STOPS = {"NOT", "GENERATED", "COMMENT", "DEFAULT", "NULL", "CONSTRAINT", "PRIMARY"}
_CONSTRAINT_STARTS = ("CONSTRAINT", "PRIMARY", "FOREIGN", "CHECK")
COLUMN_LIST = "([{<"
"""The brackets that nest inside a column list (``MAP<K, V>``'s too)."""


def table_elements(
    text: str, cursor: type[Cursor] = Cursor
) -> tuple[list[Column], list[TableConstraint]]:
    """A column list without its parentheses (DLT's ``schema=`` string): its columns and its
    table constraints, in order. ``cursor``: whose errors a refusal raises."""
    c = cursor(f"({text})", tokens(f"({text})"))
    columns, constraints = [], []
    for item in c.parenthesized(COLUMN_LIST):
        head = tokens(item)[:1]
        if head and head[0].upper in _CONSTRAINT_STARTS:
            constraints.append(_table_constraint(cursor(item, tokens(item))))
        elif item:
            columns.append(column(item, cursor))
    return columns, constraints


def _table_constraint(c: Cursor) -> TableConstraint:
    name = c.next().value if c.take("CONSTRAINT") else None
    if c.take("CHECK"):
        c.need("(")
        check = c.expression({")"}).strip()
        c.need(")")
        return TableConstraint(name, "CHECK", check)
    for kind in ("PRIMARY", "FOREIGN"):
        if c.take(kind, "KEY"):
            rest = c.peek()
            written = c.text[rest.start :].strip() if rest else ""
            return TableConstraint(
                name, "PRIMARY KEY" if kind == "PRIMARY" else "FOREIGN KEY", written
            )
    c.unexpected("a table constraint", "CONSTRAINT name CHECK (expr) | PRIMARY KEY (cols)")


def column(definition: str, cursor: type[Cursor] = Cursor) -> Column:
    """``name TYPE [NOT NULL] [GENERATED ALWAYS AS (expr) | AS IDENTITY...] [COMMENT '...']``."""
    c = cursor(definition, tokens(definition))
    found = Column(c.next().value, c.expression(_COLUMN_STOPS).strip())
    while not c.done():
        if c.take("NOT", "NULL"):
            found.nullable = False
        elif c.take("NULL"):
            found.nullable = True
        elif c.take("COMMENT"):
            found.comment = c.string()
        elif c.take("GENERATED"):
            _generated(c, found)
        else:
            token = c.next()
            raise c.error(
                f"column {found.name}: lakefeed does not know {token.text!r} in a column "
                "definition",
                fix="use name TYPE [NOT NULL] [GENERATED ALWAYS AS (expr)] [COMMENT '...']",
            )
    return found


def _generated(c: Cursor, found: Column) -> None:
    """After ``GENERATED``: ``ALWAYS AS (expr)``, or ``{ALWAYS | BY DEFAULT} AS IDENTITY``
    with its optional ``(...)``."""
    by_default = not c.take("ALWAYS") and c.take("BY", "DEFAULT")
    c.need("AS")
    if c.take("IDENTITY"):
        found.identity = _identity(c, not by_default)
    else:
        c.need("(")
        found.generated = c.expression({")"})
        c.need(")")


def _identity(c: Cursor, always: bool) -> Identity:
    """After ``IDENTITY``: the optional ``(START WITH n INCREMENT BY m)``, either part or both
    (Delta's defaults: 1 and 1)."""
    start = step = 1
    if c.take("("):
        while not c.take(")"):
            if c.take("START", "WITH"):
                start = _signed(c)
            elif c.take("INCREMENT", "BY"):
                step = _signed(c)
            else:
                c.unexpected("an identity column", "(START WITH n INCREMENT BY m)")
    return Identity(start, step, always)


def _signed(c: Cursor) -> int:
    return -c.integer() if c.take("-") else c.integer()
