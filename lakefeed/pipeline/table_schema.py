"""A table's declared schema: DLT's and SDP's ``schema=`` (a DDL string or a ``StructType``).

DLT lets a table state its columns instead of taking its query's: their types, ``NOT NULL``,
comments, generated columns (``GENERATED ALWAYS AS (expr)``, computed on every write), identity
columns (``GENERATED {ALWAYS | BY DEFAULT} AS IDENTITY``, assigned by every write), and table
constraints — ``CONSTRAINT name CHECK (expr)`` (Delta's CHECK constraint, written as
``delta.constraints.<name>``) and ``PRIMARY KEY`` / ``FOREIGN KEY`` (Unity Catalog's
informational constraints: declared, never enforced, kept nowhere here since a lakehouse has no
catalog). The query's rows are then conformed to it (see
:func:`lakefeed.runtime.conform.conform`): a column the schema does not declare is refused, a
declared one the query lacks is NULL (or computed, when generated), the rest cast to the
declared type. Parsed here without Spark, when the pipeline loads, so a typo is refused with
its place in the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.pipeline.errors import SCHEMA_INVALID
from lakefeed.sql.ddl import Column, Identity, TableConstraint, table_elements
from lakefeed.sql.references import SqlTextError

GENERATION_EXPRESSION = "delta.generationExpression"  # Delta's field metadata key
IDENTITY_START = "delta.identity.start"  # and those of an identity column
IDENTITY_STEP = "delta.identity.step"
IDENTITY_EXPLICIT = "delta.identity.allowExplicitInsert"


@dataclass(frozen=True)
class DeclaredSchema:
    """The columns a table declares, in order, and its table constraints. ``struct`` is the
    ``StructType`` when one was given (its fields are used as they are)."""

    columns: tuple[Column, ...]
    constraints: tuple[TableConstraint, ...] = ()
    struct: Any = None  # pyspark.sql.types.StructType, when given as one

    @classmethod
    def of(cls, given: Any, table: str) -> DeclaredSchema:
        """``given`` (a DDL string or a ``StructType``) for table ``table``; refused with
        :data:`SCHEMA_INVALID` when lakefeed cannot honour it."""
        if isinstance(given, str):
            try:
                columns, constraints = table_elements(given)
            except SqlTextError as error:
                raise _invalid(table, error.message, error.fix or _DDL) from None
            declared = cls(tuple(columns), tuple(constraints))
        elif hasattr(given, "fields"):
            declared = cls(tuple(_column_of(field) for field in given.fields), struct=given)
        else:
            raise _invalid(table, f"schema is a {type(given).__name__}", _DDL)
        declared._check(table)
        return declared

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def checks(self) -> dict[str, str]:
        """The CHECK constraints, name to expression (Delta keeps each as the table property
        ``delta.constraints.<name>``)."""
        return {c.name: c.text for c in self.constraints if c.kind == "CHECK" and c.name}

    def _check(self, table: str) -> None:
        if not self.columns:
            raise _invalid(table, "the schema declares no column", _DDL)
        lowered = [name.lower() for name in self.names]
        twice = sorted({name for name in lowered if lowered.count(name) > 1})
        if twice:
            raise _invalid(table, f"column(s) {', '.join(twice)} declared twice", _DDL)
        unnamed = [c.text for c in self.constraints if c.kind == "CHECK" and not c.name]
        if unnamed:
            raise _invalid(
                table,
                f"CHECK ({unnamed[0]}) has no name: Delta keeps each CHECK constraint by name",
                "write CONSTRAINT name CHECK (expr)",
            )


_DDL = (
    "give a DDL string: `name TYPE [NOT NULL] [GENERATED ALWAYS AS (expr)] [COMMENT '...'], ..., "
    "[CONSTRAINT name CHECK (expr)]`, or a pyspark StructType"
)


def _column_of(field: Any) -> Column:
    """A ``StructField`` as a declared column (its type in Spark's DDL spelling)."""
    metadata = dict(field.metadata or {})
    return Column(
        name=field.name,
        type=field.dataType.simpleString(),
        nullable=field.nullable,
        generated=metadata.get(GENERATION_EXPRESSION),
        comment=metadata.get("comment"),
        identity=_identity_of(metadata),
    )


def _identity_of(metadata: dict[str, Any]) -> Identity | None:
    """A ``StructField``'s identity column spec (Delta's ``delta.identity.*`` metadata)."""
    if IDENTITY_START not in metadata:
        return None
    explicit = str(metadata.get(IDENTITY_EXPLICIT, False)).lower() == "true"
    return Identity(int(metadata[IDENTITY_START]), int(metadata[IDENTITY_STEP]), not explicit)


def _invalid(table: str, what: str, fix: str) -> PipelineDefinitionError:
    return PipelineDefinitionError(f"table {table!r}: schema: {what}", fix=fix, code=SCHEMA_INVALID)
