"""Delta CHECK constraints and column invariants (PROTOCOL.md "Check Constraints", "Column
Invariants"), enforced on every write lakefeed makes.

A table's CHECK constraints are its properties ``delta.constraints.<name> = <Spark SQL
predicate>`` (set by any writer: delta-spark's ``ALTER TABLE ... ADD CONSTRAINT``, delta-rs's
``alter.add_constraint``, lakefeed's SQL); its invariants are ``delta.invariants`` in a column's
metadata (``{"expression": {"expression": "x > 3"}}``, delta-spark names them
``EXPRESSION(<expression>)``). As delta-spark, a row passes only when the predicate is true (null
fails it), and a violating row fails the whole write before anything is committed with
``DELTA_VIOLATE_CONSTRAINT_WITH_VALUES``: "CHECK constraint <name> (<expression>) violated by row
with values:" and the values of the columns the predicate reads.

Where Spark writes the files the predicate is a Spark SQL filter on the DataFrame that raises on
the first violating row (:func:`apply`); the Python sink, which gets Arrow batches, has each
batch checked by DataFusion (delta-rs's ``QueryBuilder``) before writing it (:func:`check_arrow`);
delta-rs's own MERGE and UPDATE check the constraints themselves (their error is translated by
:func:`translate_rs`).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake import Schema as DeltaSchema

from lakefeed.core.errors import DeltaError
from lakefeed.delta.errors import NOT_NULL, VIOLATION
from lakefeed.delta.schema import SchemaMismatchError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PREFIX = "delta.constraints."
INVARIANTS = "delta.invariants"
_MARKER = "lakefeed check constraint violated: "
_RS_INVALID = "rows failed validation check"
"""delta-rs's wording when its writer's constraint check fails (it has no error class)."""

Checks = tuple[tuple[str, str], ...]
"""(name, predicate) of each CHECK constraint and invariant of a table."""


_TOKENS = re.compile(
    r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`((?:[^`]|``)+)`|\d[\w.]*|([^\W\d]\w*)|(\S)"""
)


def references(expression: str, columns: Iterable[str]) -> list[str]:
    """The ``columns`` a Spark SQL expression reads (case-insensitive, in ``columns``' order),
    Spark-free: quoted strings, function names (a word before ``(``), types after ``AS`` and
    struct fields (after ``.``) are not column references."""
    words: set[str] = set()
    previous = ""
    matches = list(_TOKENS.finditer(expression))
    for index, match in enumerate(matches):
        quoted, word, other = match.group(1), match.group(2), match.group(3)
        following = matches[index + 1].group(0) if index + 1 < len(matches) else ""
        if quoted is not None and previous != ".":
            words.add(quoted.replace("``", "`").lower())
        elif word is not None and following != "(" and previous.upper() != "AS" and previous != ".":
            words.add(word.lower())
        previous = other or match.group(0)
    return list(dict.fromkeys(c for c in columns if c.lower() in words))


def of_table(configuration: Mapping[str, str], schema: DeltaSchema | None) -> Checks:
    """The table's CHECK constraints (property order) then its top-level column invariants."""
    found = [
        (key[len(PREFIX) :], str(value))
        for key, value in configuration.items()
        if key.lower().startswith(PREFIX)
    ]
    for field in schema.fields if schema is not None else ():
        text = field.metadata.get(INVARIANTS)
        if text:
            expression = json.loads(str(text))["expression"]["expression"]
            found.append((f"EXPRESSION({expression})", expression))
    return tuple(found)


def describe(name: str, expression: str) -> str:
    """Delta's head of the violation message."""
    return f"CHECK constraint {name} ({expression}) violated by row with values:"


def _values(row: Mapping[str, object]) -> str:
    return "".join(f"\n - {column} : {_text(value)}" for column, value in row.items())


def _text(value: object) -> str:
    return "null" if value is None else str(value)


def violated(name: str, expression: str, row: Mapping[str, object], root: str) -> DeltaError:
    """The coded error of a row (its values of the predicate's columns) breaking a check."""
    return SchemaMismatchError(
        f"{describe(name, expression)}{_values(row)}\n(writing the Delta table {root})",
        fix=f"filter out the rows where ({expression}) is not true, or drop the constraint "
        f"(ALTER TABLE ... DROP CONSTRAINT {name})",
        code=VIOLATION,
    )


def apply(frame: DataFrame, checks: Checks) -> DataFrame:
    """``frame`` filtered by every check, each failing the task at the first row where its
    predicate is not true, with Delta's message and that row's values."""
    from pyspark.sql import functions as F  # the Spark-free core imports this module too

    for name, expression in checks:
        inputs = references(expression, frame.columns)
        values = [
            F.concat(F.lit(f"\n - {c} : "), F.coalesce(F.col(c).cast("string"), F.lit("null")))
            for c in inputs
        ]
        message = F.concat(F.lit(_MARKER + describe(name, expression)), *values)
        holds = F.coalesce(F.expr(f"({expression})"), F.lit(False))
        frame = frame.where(F.when(holds, F.lit(True)).otherwise(F.raise_error(message)))
    return frame


def violation(error: BaseException, root: str) -> DeltaError | None:
    """The coded error of a Spark write that failed on :func:`apply`'s check, else None."""
    text = str(error)
    start = text.find(_MARKER)
    if start < 0:
        return None
    detail = text[start + len(_MARKER) :].split("\n\n")[0].split(" SQLSTATE")[0].rstrip()
    return SchemaMismatchError(
        f"{detail}\n(writing the Delta table {root})",
        fix="filter out the rows that break the constraint, or drop the constraint "
        "(ALTER TABLE ... DROP CONSTRAINT name)",
        code=VIOLATION,
    )


def check_arrow(batch: pa.RecordBatch | pa.Table, checks: Checks, root: str) -> None:
    """Fail on the first row of ``batch`` that breaks a check, evaluated by DataFusion (the
    Python sink's rows never pass through Spark): the columns the checks read go into a
    throw-away local Delta table that delta-rs's ``QueryBuilder`` queries."""
    if not checks or batch.num_rows == 0:
        return
    table = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
    used = {c for _, e in checks for c in references(e, table.column_names)}
    with scratch_query(table.select([c for c in table.column_names if c in used])) as query:
        for name, expression in checks:
            inputs = references(expression, table.column_names)
            columns = ", ".join(f"`{c}`" for c in inputs) or "1"
            found = pa.table(
                query.execute(
                    f"SELECT {columns} FROM t WHERE NOT coalesce(({expression}), false) LIMIT 1"
                )
            )
            if found.num_rows:
                raise violated(name, expression, found.to_pylist()[0] if inputs else {}, root)


@contextlib.contextmanager
def scratch_query(rows: pa.Table) -> Iterator[QueryBuilder]:
    """``rows`` as the table ``t`` of a DataFusion query (delta-rs's ``QueryBuilder``), through
    a throw-away local Delta table removed afterwards: DataFusion evaluates the Spark SQL
    expressions of checks and generated columns on rows that never pass through Spark."""
    scratch = tempfile.mkdtemp(prefix="lakefeed-rows-")
    try:
        write_deltalake(scratch, rows)
        yield QueryBuilder().register("t", DeltaTable(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_rows(rows: pa.Table, table: pa.Schema, checks: Checks, root: str) -> None:
    """Fail on rows a change writes (``rows``, the table's columns by logical name) that leave
    a NOT NULL column of ``table`` null, a struct's NOT NULL field too where the struct is not
    null (Delta's ``DELTA_NOT_NULL_CONSTRAINT_VIOLATED``), or break a check
    (:func:`check_arrow`): what the deletion-vector DML checks before it writes anything, as
    delta-spark checks the rows its MERGE and UPDATE write."""
    for field in table:
        path = _null_in_required(rows.column(field.name).combine_chunks(), field, field.name)
        if path is not None:
            raise SchemaMismatchError(
                f"NOT NULL constraint violated for column: {path}.\n"
                f"(writing the Delta table {root})",
                fix=f"give {path!r} a value in every row the change writes, or make the column "
                "nullable",
                code=NOT_NULL,
            )
    check_arrow(rows, checks, root)


def _null_in_required(values: pa.Array, field: pa.Field, path: str) -> str | None:
    """The dotted name of the first NOT NULL field (``field`` or a struct field under it) that
    ``values`` leave null where its parent is present; None when there is none."""
    if not field.nullable and values.null_count:
        return path
    if not pa.types.is_struct(field.type):
        return None
    present = values.filter(values.is_valid()) if values.null_count else values
    for index, child in enumerate(field.type):
        inner = pc.struct_field(present, [index])
        found = _null_in_required(inner, child, f"{path}.{child.name}")
        if found is not None:
            return found
    return None


def rs_violation(error: BaseException) -> bool:
    """Whether a delta-rs error is its writer's failed constraint check."""
    return _RS_INVALID in str(error)


def translate_rs(error: BaseException, checks: Checks, root: str) -> DeltaError:
    """delta-rs's failed constraint check (MERGE, UPDATE, its writes: :func:`rs_violation`) as
    Delta's coded error, with the first invalid row delta-rs previews."""
    text = str(error)
    names = ", ".join(f"{n} ({e})" for n, e in checks) or "the table's constraints"
    return SchemaMismatchError(
        f"CHECK constraint violated by row with values:{_values(_preview(text))}\n"
        f"(writing the Delta table {root}, whose constraints are {names})",
        fix="change the rows so that every constraint holds, or drop the constraint "
        "(ALTER TABLE ... DROP CONSTRAINT name)",
        code=VIOLATION,
    )


def _preview(text: str) -> dict[str, str]:
    """The first row of delta-rs's ASCII preview of invalid rows (column -> value)."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.strip().startswith("|")
    ]
    if len(rows) < 2:
        return {}
    return {c: (v if v else "null") for c, v in zip(rows[0], rows[1], strict=False)}
