"""A query's rows in the shape of its table's declared schema (DLT's ``schema=``).

The declared schema (:mod:`lakefeed.pipeline.table_schema`) is what the table holds, so every
reader — the flows downstream in validation, the run, a backfill — sees the same columns as
the Delta table does. :func:`conform` projects the query onto it: a column the schema does not
declare is refused before anything runs; a declared column the query lacks is NULL, or its
generation expression when generated, or left to the write (which assigns it) when an identity
column; the others are cast to the declared type (no cast, and the very column with its
watermark, when the type already matches).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.delta import create
from lakefeed.pipeline.api import Dataset
from lakefeed.pipeline.table_schema import (
    GENERATION_EXPRESSION,
    IDENTITY_EXPLICIT,
    IDENTITY_START,
    IDENTITY_STEP,
    DeclaredSchema,
)
from lakefeed.runtime.errors import SCHEMA_MISMATCH


def struct(declared: DeclaredSchema) -> T.StructType:
    """The declared schema as Spark's type, with Delta's field metadata (comments, generation
    expressions). Types are parsed by Spark (the active session), so any type Spark knows."""
    if declared.struct is not None:
        return declared.struct
    fields = []
    for column in declared.columns:
        metadata: dict[str, Any] = {}
        if column.comment is not None:
            metadata["comment"] = column.comment
        if column.generated is not None:
            metadata[GENERATION_EXPRESSION] = column.generated
        if column.identity is not None:
            metadata |= {
                IDENTITY_START: column.identity.start,
                IDENTITY_STEP: column.identity.step,
                IDENTITY_EXPLICIT: not column.identity.always,
            }
        data_type = T.DataType.fromDDL(column.type)
        fields.append(T.StructField(column.name, data_type, column.nullable, metadata))
    return T.StructType(fields)


def conform(frame: DataFrame, declared: DeclaredSchema, table: str) -> DataFrame:
    """``frame``'s rows as table ``table`` declares them (see the module docstring)."""
    schema = struct(declared)
    given = {name.lower(): name for name in frame.columns}
    declared_names = {field.name.lower() for field in schema.fields}
    extra = [name for name in frame.columns if name.lower() not in declared_names]
    if extra:
        raise PipelineDefinitionError(
            f"the query of {table!r} returns column(s) {', '.join(extra)}, which its schema "
            f"does not declare (it declares {', '.join(f.name for f in schema.fields)})",
            fix="add them to the table's schema=, or leave them out of the query",
            code=SCHEMA_MISMATCH,
        )
    types = dict(frame.dtypes)
    columns = [
        _column(field, given, types)
        for field in schema.fields
        if field.name.lower() in given or IDENTITY_START not in field.metadata
    ]
    return frame.select(*columns)


def _column(field: T.StructField, given: dict[str, str], types: dict[str, str]) -> SparkColumn:
    name = given.get(field.name.lower())
    if name is not None:
        column = F.col(f"`{name}`")
        if types[name] == field.dataType.simpleString() and name == field.name:
            return column  # the very attribute: a watermark on it stays
        return column.cast(field.dataType).alias(field.name)
    expression = field.metadata.get(GENERATION_EXPRESSION)
    value = F.expr(expression) if expression is not None else F.lit(None)
    return value.cast(field.dataType).alias(field.name)


def create_declared(path: str, dataset: Dataset) -> None:
    """Create ``dataset``'s Delta table at ``path`` with its declared schema: its generated
    columns (checked as delta-spark checks them), NOT NULL columns, comments, and its CHECK
    constraints (added as ``ALTER TABLE ADD CONSTRAINT`` adds them: Delta takes no constraint
    through TBLPROPERTIES)."""
    assert dataset.schema is not None
    schema = create.check_new(
        SparkSession.active(),
        f"delta.`{path}`",
        list(struct(dataset.schema).fields),
        dataset.partition_cols,
        dataset.table_properties,
    )
    create.create(
        path,
        schema,
        partition_by=dataset.partition_cols,
        description=dataset.comment or None,
        configuration=dataset.table_properties,
        constraints=dataset.schema.checks(),
        cluster_by=dataset.cluster_by,
    )
