"""Delta generated columns (PROTOCOL.md "Generated Columns", writer version 4): a column whose
field metadata ``delta.generationExpression`` holds a Spark SQL expression over the other
columns, which every writer must honour.

As in Delta, a write that leaves the column out gets it computed, and a write that gives it has
each row checked against the expression (``col <=> expression``) and fails on the first row
that differs, naming that row's values of the column and of the columns the expression reads
(:func:`references`). A write lacking one of those columns is refused before it starts
(delta-spark fails on the unresolved column). Spark SQL evaluates the expression, as in
Delta: :func:`apply` is the one place a DataFrame going into a Delta write gets its generated
columns, so only writes whose files Spark produces can honour them; the Python sink, which
receives Arrow rows, is refused instead.
UPDATE and MERGE recompute the generated columns of the rows they write where lakefeed writes
those rows itself (:mod:`.generation`); delta-rs 1.6's do not, so a change that would go to
delta-rs is refused on such tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakefeed.delta.constraints import VIOLATION, references
from lakefeed.delta.errors import MISSING_INPUT, PYTHON_SINK
from lakefeed.delta.generation import GENERATION_EXPRESSION as GENERATION_EXPRESSION
from lakefeed.delta.generation import Generated
from lakefeed.delta.generation import expressions as expressions
from lakefeed.delta.schema import SchemaMismatchError

_MARKER = "lakefeed generated column violated: "


def completed(data: pa.Schema, table: pa.Schema, generated: Generated, root: str) -> pa.Schema:
    """The schema the write has once :func:`apply` adds the generated columns it lacks (what
    the partition and schema checks look at before any row is written); a write lacking a
    column a generated one is computed from is refused (:func:`check_inputs`)."""
    check_inputs(data, table, generated, root)
    given = {name.lower() for name in data.names}
    missing = [table.field(name) for name, _ in generated if name.lower() not in given]
    return pa.schema([*data, *missing])


def check_inputs(data: pa.Schema, table: pa.Schema, generated: Generated, root: str) -> None:
    """Refuse a write that lacks a table column a generated column's expression reads: delta-spark
    cannot evaluate the expression then (its analysis fails on the unresolved column), and a
    given value could not be checked. Names only the offending columns."""
    given = {name.lower() for name in data.names}
    for name, expression in generated:
        lacking = [c for c in references(expression, table.names) if c.lower() not in given]
        if lacking:
            raise SchemaMismatchError(
                f"the generated column `{name}` = {expression} of the Delta table {root} is "
                f"computed from {', '.join(f'`{c}`' for c in lacking)}, which the written rows "
                "lack",
                fix=f"add {', '.join(lacking)} to the written rows (a null literal cast to the "
                "column's type for nulls)",
                code=MISSING_INPUT,
            )


def apply(frame: DataFrame, generated: Generated) -> DataFrame:
    """``frame`` with each generated column it lacks computed, and each it gives checked."""
    given = {name.lower(): name for name in frame.columns}
    for name, expression in generated:
        column = given.get(name.lower())
        if column is None:
            frame = frame.withColumn(name, F.expr(expression))
        else:
            inputs = references(expression, frame.columns)
            frame = frame.withColumn(column, _checked(column, expression, inputs))
    return frame


def _checked(name: str, expression: str, inputs: Iterable[str]) -> Column:
    """The given value where it equals the expression (null-safe, as Delta's check), else a
    task failure naming the row's values of the column and the columns its expression reads
    (Delta's ``CHECK constraint ... violated by row with values`` message)."""
    values = [
        F.concat(F.lit(f"\n - {c} : "), F.coalesce(F.col(c).cast("string"), F.lit("null")))
        for c in dict.fromkeys([name, *inputs])
    ]
    message = F.concat(
        F.lit(
            f"{_MARKER}CHECK constraint Generated Column (`{name}` <=> {expression}) violated "
            "by row with values:"
        ),
        *values,
    )
    return F.when(F.col(name).eqNullSafe(F.expr(expression)), F.col(name)).otherwise(
        F.raise_error(message)  # null-typed: Spark takes the column's type for the branch
    )


def violation(error: BaseException, root: str) -> SchemaMismatchError | None:
    """The coded error for a write that failed on :func:`_checked`'s check, else None."""
    text = str(error)
    start = text.find(_MARKER)
    if start < 0:
        return None
    detail = text[start + len(_MARKER) :].split("\n\n")[0].split(" SQLSTATE")[0]
    return SchemaMismatchError(
        f"{detail.rstrip()}\n(writing the Delta table {root})",
        fix="leave the generated column out of the written rows (lakefeed computes it), or "
        "give it the value its expression computes",
        code=VIOLATION,
    )


def refuse_python_sink(computed: Sequence[str], root: str) -> None:
    """The Python sink gets Arrow rows and cannot evaluate Spark SQL nor hand out identity
    values: refuse it for a table with columns Spark computes (``computed``: generated and
    identity columns) rather than write rows that break them."""
    if computed:
        raise SchemaMismatchError(
            f"the Delta table {root} has generated columns ({', '.join(computed)}): lakefeed "
            "computes them only when Spark writes the data files, and this write goes to the "
            "Python sink",
            fix='drop .option("lakefeed.writer", "python"), and use a session from '
            "lakefeed.spark_session() (in UTC, with lakefeed's commit protocol)",
            code=PYTHON_SINK,
        )
