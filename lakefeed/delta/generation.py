"""Generated columns on Arrow rows, Spark-free: the rows lakefeed's UPDATE and MERGE write
anew (:mod:`.dv_write`, :mod:`.dv_merge`) get their generated columns as delta-spark's DML
gives them (PROTOCOL.md "Generated Columns").

A column a change leaves unset is computed again from the row's new values (an UPDATE of
``eventTime`` moves ``eventDate = CAST(eventTime AS DATE)`` with it); a column a change sets
must equal its expression, null-safe, else the change fails on the first such row with Delta's
``DELTA_VIOLATE_CONSTRAINT_WITH_VALUES`` naming the row's values (``CHECK constraint Generated
Column (...)``), before anything is written. DataFusion (delta-rs's ``QueryBuilder``) evaluates
the expressions, as :func:`.constraints.check_arrow` evaluates CHECK constraints; an expression
it cannot evaluate (Spark SQL it lacks) is :class:`.predicates.Untranslatable`: the change then
goes to delta-rs, which refuses tables with generated columns (nothing written).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from deltalake import Schema as DeltaSchema
from sqlglot import expressions as exp

from lakefeed.delta import constraints
from lakefeed.delta.errors import VIOLATION
from lakefeed.delta.predicates import Untranslatable
from lakefeed.delta.schema import SchemaMismatchError

GENERATION_EXPRESSION = "delta.generationExpression"
_ROW = "__lakefeed_row"

Generated = tuple[tuple[str, str], ...]
"""(column, expression) for each generated column of a table, in the table's order."""


def expressions(schema: DeltaSchema | None) -> Generated:
    """The table's generated columns (none for a table not yet created)."""
    if schema is None:
        return ()
    return tuple(
        (field.name, str(field.metadata[GENERATION_EXPRESSION]))
        for field in schema.fields
        if GENERATION_EXPRESSION in field.metadata
    )


def regenerate(rows: pa.Table, given: Collection[str], generated: Generated, root: str) -> pa.Table:
    """``rows`` (the table's columns) with each generated column not in ``given`` computed
    from the row, and each in ``given`` checked against its expression (the module doc)."""
    if not generated or rows.num_rows == 0:
        return rows
    values = _evaluated(rows, generated)
    named = {name.lower() for name in given}
    for (name, expression), value in zip(generated, values, strict=True):
        index = rows.schema.get_field_index(name)
        field = rows.schema.field(index)
        try:
            value = pc.cast(value, field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
            raise Untranslatable(str(error)) from None
        if name.lower() in named:
            _check(rows, name, expression, value, root)
        else:
            rows = rows.set_column(index, field, value)
    return rows


def _check(rows: pa.Table, name: str, expression: str, value: pa.Array, root: str) -> None:
    """Fail on the first row whose ``name`` differs from its expression's ``value``."""
    given = rows.column(name)
    same = pc.or_kleene(
        pc.equal(given, value), pc.and_(pc.is_null(given), pc.is_null(value))
    ).fill_null(False)
    bad = np.flatnonzero(~np.asarray(same))
    if len(bad):
        inputs = constraints.references(expression, rows.column_names)
        row = rows.select(list(dict.fromkeys([name, *inputs]))).slice(int(bad[0]), 1)
        values = "".join(
            f"\n - {column} : {'null' if value is None else value}"
            for column, value in row.to_pylist()[0].items()
        )
        head = constraints.describe("Generated Column", f"`{name}` <=> {expression}")
        raise SchemaMismatchError(
            f"{head}{values}\n(writing the Delta table {root})",
            fix=f"leave {name} out of the SET clause (lakefeed computes it), or set it to the "
            "value its expression computes",
            code=VIOLATION,
        )


def _evaluated(rows: pa.Table, generated: Generated) -> list[pa.Array]:
    """Each expression's value per row of ``rows``, in row order, from DataFusion over a
    throw-away local Delta table of the columns the expressions read."""
    used = {c for _, e in generated for c in constraints.references(e, rows.column_names)}
    table = rows.select([c for c in rows.column_names if c in used])
    table = table.append_column(_ROW, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    select = ", ".join(f'({_datafusion(e)}) AS "g{i}"' for i, (_, e) in enumerate(generated))
    try:
        with constraints.scratch_query(table) as query:
            found = pa.table(query.execute(f'SELECT {select} FROM t ORDER BY "{_ROW}"'))
    except Exception as error:  # noqa: BLE001 - DataFusion cannot evaluate the expression
        raise Untranslatable(f"generated column expression: {error}") from None
    return [found.column(i).combine_chunks() for i in range(len(generated))]


def _datafusion(expression: str) -> str:
    """A Spark SQL expression as DataFusion reads it: identifiers double-quoted (DataFusion
    folds unquoted names to lower case)."""
    try:
        tree = sqlglot.parse_one(expression, read="spark")
    except sqlglot.errors.ParseError as error:
        raise Untranslatable(str(error)) from None
    for column in tree.find_all(exp.Column):
        column.this.set("quoted", True)
    return tree.sql(dialect="postgres")
