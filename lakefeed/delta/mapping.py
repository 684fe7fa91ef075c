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
import uuid
from collections.abc import Callable, Mapping, Sequence
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


# ---------------------------------------------------------------- writing


MAX_ID = "delta.columnMapping.maxColumnId"
SPARK_FIELD_ID = "parquet.field.id"
"""Spark's field metadata key for the Parquet field id its writer stores."""


def column(columns: Sequence[Column], name: str) -> Column:
    """The column named ``name`` (logical) among ``columns``."""
    found = next((c for c in columns if c.name == name), None)
    if found is None:
        raise KeyError(f"column {name!r} has no column mapping")
    return found


def physical_schema(mapping: ColumnMapping, schema: pa.Schema) -> pa.Schema:
    """The Arrow schema files of a column-mapped table store: physical names at every level,
    Parquet field ids on each field that has one (delta-spark and delta-rs write them in both
    modes; mode ``id`` needs them)."""
    return pa.schema([_physical_field(f, column(mapping.columns, f.name)) for f in schema])


def _physical_field(field: pa.Field, described: Column) -> pa.Field:
    meta = None if described.id is None else {FIELD_ID: str(described.id).encode()}
    return pa.field(described.physical, _physical_type(field.type, described), field.nullable, meta)


def _physical_type(dtype: pa.DataType, described: Column) -> pa.DataType:
    if pa.types.is_struct(dtype):
        fields = [dtype.field(i) for i in range(dtype.num_fields)]
        return pa.struct([_physical_field(f, column(described.children, f.name)) for f in fields])
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        value = dtype.value_field
        inner = _physical_type(value.type, described.child("element") or _leaf("element"))
        item = pa.field(value.name, inner, value.nullable)
        return pa.large_list(item) if pa.types.is_large_list(dtype) else pa.list_(item)
    if pa.types.is_map(dtype):
        key, item = dtype.key_field, dtype.item_field
        return pa.map_(
            pa.field(
                key.name,
                _physical_type(key.type, described.child("key") or _leaf("key")),
                nullable=False,
            ),
            pa.field(
                item.name,
                _physical_type(item.type, described.child("value") or _leaf("value")),
                item.nullable,
            ),
        )
    return dtype


def _leaf(name: str) -> Column:
    return Column(name, name, None)


def to_physical(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (logical names) as ``schema`` (:func:`physical_schema` of it): the same
    buffers under the physical names, nothing copied."""
    arrays = [batch.column(i).view(schema.field(i).type) for i in range(batch.num_columns)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def physical_json(struct: dict[str, Any], columns: Sequence[Column]) -> dict[str, Any]:
    """A struct type in Spark's JSON form with physical names and Spark's Parquet field ids
    (``parquet.field.id``) at every level: what Spark's writer is cast to before it writes."""
    fields = []
    for data in struct["fields"]:
        described = column(columns, data["name"])
        meta = dict(data.get("metadata") or {})
        if described.id is not None:
            meta[SPARK_FIELD_ID] = described.id
        dtype = _physical_type_json(data["type"], described)
        fields.append({**data, "name": described.physical, "type": dtype, "metadata": meta})
    return {**struct, "fields": fields}


def _physical_type_json(dtype: Any, described: Column) -> Any:
    if not isinstance(dtype, dict):
        return dtype
    kind = dtype["type"]
    if kind == "struct":
        return physical_json(dtype, described.children)
    if kind == "array":
        element = described.child("element") or _leaf("element")
        return {**dtype, "elementType": _physical_type_json(dtype["elementType"], element)}
    if kind == "map":
        key = described.child("key") or _leaf("key")
        value = described.child("value") or _leaf("value")
        return {
            **dtype,
            "keyType": _physical_type_json(dtype["keyType"], key),
            "valueType": _physical_type_json(dtype["valueType"], value),
        }
    return dtype


def new_physical_name() -> str:
    """delta-spark's physical name for a column added under column mapping."""
    return f"col-{uuid.uuid4()}"


def assign(
    fields: Sequence[dict[str, Any]], last_id: int, physical: Callable[[str], str]
) -> tuple[list[dict[str, Any]], int]:
    """``fields`` (Delta's JSON form) with an id and a physical name given to every field,
    nested ones too, that lacks them, counting ids up from ``last_id``; also the last id
    given. ``physical``: the physical name of a logical one (a new column's
    :func:`new_physical_name`; the name itself when mapping is turned on for existing files)."""
    given = []
    for data in fields:
        meta = dict(data.get("metadata") or {})
        if meta.get(ID) is None:
            last_id += 1
            meta[ID] = last_id
        meta.setdefault(PHYSICAL_NAME, physical(str(data["name"])))
        dtype, last_id = _assign_type(data["type"], last_id, physical)
        given.append({**data, "type": dtype, "metadata": meta})
    return given, last_id


def _assign_type(dtype: Any, last_id: int, physical: Callable[[str], str]) -> tuple[Any, int]:
    if not isinstance(dtype, dict):
        return dtype, last_id
    kind = dtype["type"]
    if kind == "struct":
        fields, last_id = assign(dtype["fields"], last_id, physical)
        return {**dtype, "fields": fields}, last_id
    if kind == "array":
        element, last_id = _assign_type(dtype["elementType"], last_id, physical)
        return {**dtype, "elementType": element}, last_id
    if kind == "map":
        key, last_id = _assign_type(dtype["keyType"], last_id, physical)
        value, last_id = _assign_type(dtype["valueType"], last_id, physical)
        return {**dtype, "keyType": key, "valueType": value}, last_id
    return dtype, last_id


def max_id(fields: Sequence[dict[str, Any]]) -> int:
    """The largest column id in ``fields`` (JSON form), nested ones included; 0 for none."""
    found = 0
    for data in fields:
        ident = (data.get("metadata") or {}).get(ID)
        found = max(found, int(ident or 0), _max_type_id(data["type"]))
    return found


def _max_type_id(dtype: Any) -> int:
    if not isinstance(dtype, dict):
        return 0
    kind = dtype["type"]
    if kind == "struct":
        return max_id(dtype["fields"])
    if kind == "array":
        return _max_type_id(dtype["elementType"])
    if kind == "map":
        return max(_max_type_id(dtype["keyType"]), _max_type_id(dtype["valueType"]))
    return 0
