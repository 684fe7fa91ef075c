"""Column mapping: the names (or Parquet field ids) a Delta table's data files use for its
columns, Spark-free.

Under column mapping (PROTOCOL.md, "Column Mapping") every column, nested ones too, has a
physical name (``delta.columnMapping.physicalName``) and an id (``delta.columnMapping.id``).
Files store the physical names and the ids as Parquet field ids; the log keys partition values
and statistics by physical name. Mode ``name`` resolves file columns by physical name, mode
``id`` by field id; a column a file lacks reads as null. Renaming or dropping a column changes
only the table's schema, so readers always present the logical names of the schema they read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

PHYSICAL_NAME = "delta.columnMapping.physicalName"
ID = "delta.columnMapping.id"
MODE = "delta.columnMapping.mode"
FIELD_ID = b"PARQUET:field_id"
"""Arrow field metadata key pyarrow gives a Parquet field id under."""


@dataclass(frozen=True)
class Column:
    """One field of the schema: its logical and physical name, id and nested fields (a list's
    element, a map's key and value are children named ``element``, ``key``, ``value``)."""

    name: str
    physical: str
    id: int | None
    children: tuple[Column, ...] = field(default_factory=tuple)

    def child(self, name: str) -> Column | None:
        return next((c for c in self.children if c.name == name), None)


@dataclass(frozen=True)
class ColumnMapping:
    """A table's column mapping mode and the columns of its schema (``none``: no mapping)."""

    mode: str
    columns: tuple[Column, ...]

    @property
    def active(self) -> bool:
        return self.mode in ("name", "id")

    @property
    def by_id(self) -> bool:
        return self.mode == "id"

    def physical_names(self) -> dict[str, str]:
        """Logical to physical name of each top-level column."""
        return {c.name: c.physical for c in self.columns}

    def logical_partition_values(self, values: Mapping[str, str | None]) -> dict[str, str | None]:
        """An ``add``'s partition values (keyed by physical name) keyed by logical name."""
        if not self.active:
            return dict(values)
        logical = {c.physical: c.name for c in self.columns}
        return {logical.get(k, k): v for k, v in values.items()}


def from_schema(
    schema_json: str | dict[str, Any], configuration: Mapping[str, str | None]
) -> ColumnMapping:
    """The mapping of a table from its ``schemaString`` and ``configuration``."""
    data = json.loads(schema_json) if isinstance(schema_json, str) else schema_json
    mode = (configuration.get(MODE) or "none").lower()
    return ColumnMapping(mode, tuple(_column(f) for f in data["fields"]))


def _column(data: dict[str, Any]) -> Column:
    meta = data.get("metadata") or {}
    name = str(data["name"])
    ident = meta.get(ID)
    return Column(
        name,
        str(meta.get(PHYSICAL_NAME) or name),
        None if ident is None else int(ident),
        _children(data["type"]),
    )


def _children(dtype: Any) -> tuple[Column, ...]:
    """Nested columns of a Delta type (JSON form): struct fields, or pseudo-columns for a
    list's element and a map's key and value (named as their path components)."""
    if not isinstance(dtype, dict):
        return ()
    kind = dtype.get("type")
    if kind == "struct":
        return tuple(_column(f) for f in dtype["fields"])
    if kind == "array":
        return (Column("element", "element", None, _children(dtype["elementType"])),)
    if kind == "map":
        return (
            Column("key", "key", None, _children(dtype["keyType"])),
            Column("value", "value", None, _children(dtype["valueType"])),
        )
    return ()


# ---------------------------------------------------------------- Arrow (the Python reader)


def file_columns(mapping: ColumnMapping, file_schema: pa.Schema) -> dict[str, str]:
    """Logical name -> the name of the file's column holding it (absent: the file lacks it)."""
    found = {}
    for column in mapping.columns:
        index = _find(column, list(file_schema), mapping.by_id)
        if index is not None:
            found[column.name] = file_schema.field(index).name
    return found


def _find(column: Column, fields: list[pa.Field], by_id: bool) -> int | None:
    for index, candidate in enumerate(fields):
        if by_id:
            meta = candidate.metadata or {}
            if column.id is not None and meta.get(FIELD_ID) == str(column.id).encode():
                return index
        elif candidate.name == column.physical:
            return index
    return None


def to_logical(array: pa.Array, column: Column, target: pa.DataType, by_id: bool) -> pa.Array:
    """A file's column (physical nested names) as ``target`` (logical names): nested fields
    are matched by physical name or id, missing ones read as null."""
    dtype = array.type
    if pa.types.is_struct(target) and pa.types.is_struct(dtype):
        fields = [dtype.field(i) for i in range(dtype.num_fields)]
        children = []
        for i in range(target.num_fields):
            want = target.field(i)
            nested = column.child(want.name)
            index = None if nested is None else _find(nested, fields, by_id)
            if nested is None or index is None:
                children.append(pa.nulls(len(array), want.type))
            else:
                part = pc.struct_field(array, [index])
                children.append(to_logical(part, nested, want.type, by_id))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target) and pa.types.is_list(dtype):
        element = column.child("element") or Column("element", "element", None)
        values = to_logical(array.values, element, target.value_type, by_id)
        mask = array.is_null() if array.null_count else None
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(dtype):
        key = column.child("key") or Column("key", "key", None)
        value = column.child("value") or Column("value", "value", None)
        keys = to_logical(array.keys, key, target.key_type, by_id)
        items = to_logical(array.items, value, target.item_type, by_id)
        mask = array.is_null() if array.null_count else None
        return pa.MapArray.from_arrays(array.offsets, keys, items, type=target, mask=mask)
    return array if dtype == target else array.cast(target)
