"""Schema rules of a Delta table written from Arrow: what a write may change, and how.

Delta (like Spark's native connector) stores every column as nullable, lets a write add columns
only when ``mergeSchema`` is on, and refuses any change of a column's type: a silent cast would
rewrite meaning, a silent failure at read time would be worse.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import Schema as DeltaSchema

from lakefeed.delta.errors import SchemaMismatchError

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"
"""The session conf that turns ``mergeSchema`` on for every Delta write without the option."""


def as_nullable(schema: pa.Schema) -> pa.Schema:
    """Delta tables written by Spark mark every column nullable; do the same (recursively)."""
    return pa.schema([_nullable_field(f) for f in schema], metadata=schema.metadata)


def _nullable_field(field: pa.Field) -> pa.Field:
    return pa.field(field.name, _nullable_type(field.type), nullable=True)


def _nullable_type(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(dtype):
        return pa.struct([_nullable_field(dtype.field(i)) for i in range(dtype.num_fields)])
    if pa.types.is_large_list(dtype):
        return pa.large_list(_nullable_field(dtype.value_field))
    if pa.types.is_list(dtype):
        return pa.list_(_nullable_field(dtype.value_field))
    if pa.types.is_map(dtype):
        return pa.map_(dtype.key_type, _nullable_field(dtype.item_field))
    return dtype


def table_arrow_schema(schema: DeltaSchema) -> pa.Schema:
    """The Arrow schema of a Delta schema (delta-rs hands out an arro3 schema)."""
    return pa.schema(schema.to_arrow())


def _canonical(dtype: pa.DataType) -> str:
    """Types equal up to nullability and Arrow's large/view variants compare equal."""
    return str(DeltaSchema.from_arrow(pa.schema([pa.field("x", _nullable_type(dtype))])))


def merge_schema(table: pa.Schema, data: pa.Schema, *, merge: bool, path: str = "") -> pa.Schema:
    """The schema the table has after this write, or a refusal that says what to do.

    Columns missing from the data are fine (they read as null). New columns need ``merge``;
    a column whose type differs is refused even with ``merge`` (Delta's rule).
    """
    by_lower = {f.name.lower(): f for f in table}
    new_fields: list[pa.Field] = []
    for field in data:
        existing = by_lower.get(field.name.lower())
        if existing is None:
            new_fields.append(_nullable_field(field))
            continue
        if existing.name != field.name:
            raise SchemaMismatchError(
                f"column {field.name!r} differs only by case from the table's column "
                f"{existing.name!r} in {path or 'the Delta table'}: rename it to {existing.name!r}"
            )
        if _canonical(existing.type) != _canonical(field.type):
            raise SchemaMismatchError(
                f"incompatible type change for column {field.name!r} in "
                f"{path or 'the Delta table'}: the table has {existing.type}, the data has "
                f"{field.type}. Cast the column to {existing.type} before writing, or write to "
                "a new table (overwrite with option overwriteSchema=true replaces the schema)."
            )
    if new_fields and not merge:
        names = ", ".join(f.name for f in new_fields)
        raise SchemaMismatchError(
            f"the data has columns the Delta table {path or ''} does not have: {names}. "
            'Set .option("mergeSchema", "true") to add them to the table, or drop them.'
        )
    return pa.schema(list(table) + new_fields, metadata=table.metadata)
