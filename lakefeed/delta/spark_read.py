"""Delta data files as a DataFrame of Spark's own Parquet reader: no row passes through Python.

The stream source plans in Python (offsets, change checks, limits) and hands Spark a batch as
this DataFrame (see :mod:`lakefeed.spark.jvm`). Partition values are not in Delta's files: each
group of files with the same values becomes one Parquet scan with those values as literals, so a
filter on a partition column lets Spark's optimizer drop whole groups.

Deletion vectors are applied in the scan, as delta-spark does, on the row's position in its
file (Spark's hidden ``_metadata.row_index``): the files of a group that have deleted rows are
scanned apart from the others, and their rows anti-joined (broadcast) with the deleted rows'
keys. A key is one ``long``, Spark's ``hash`` of the file's name (``_metadata.file_name``) in the
high 32 bits and the row's position in the low ones: a join on one long is a lookup in Spark's
``LongHashedRelation``, about a third cheaper per row than one on the (name, position) pair, whose
string key is copied and hashed for every row. Keys are unique within a scan: the names' hashes
differ (a group whose hashes repeat is split), computed by Spark itself, and positions fit in 32
bits (a row past them gets no key and is kept; a vector deleting one is refused). Spark's
``_metadata.file_name`` is percent-encoded as Hadoop's URI of the path, so the names hashed for
the deleted rows are spelled by Hadoop too. Measured against this and rejected (docs/benchmarks.md,
deletion vectors, round 3): a scan per file filtered on the position alone costs 3-4x one scan
(planning and tasks), and ``NOT key IN (...)`` boxes every row and loses to the join.

Under column mapping the scan reads physical names (or Parquet field ids, mode ``id``) and
presents logical ones: nested types are cast to their logical form by position.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DataType,
    LongType,
    MapType,
    StructField,
    StructType,
    TimestampNTZType,
)

from lakefeed.core import storage
from lakefeed.delta import dv
from lakefeed.delta.errors import DV_CORRUPT, DeletionVectorError
from lakefeed.delta.files import local_path, parse_partition_value
from lakefeed.delta.log import DataFile
from lakefeed.delta.mapping import Column as Mapped
from lakefeed.delta.mapping import ColumnMapping
from lakefeed.delta.schema import as_nullable, table_arrow_schema

FIELD_ID_READ = "spark.sql.parquet.fieldId.read.enabled"
"""Spark reads Parquet columns by field id (metadata ``parquet.field.id``) with this on; it
changes nothing for schemas without ids."""
_KEY = "__lakefeed_static_deleted"
"""The deleted rows' key column; the prefix keeps them a batch relation inside a planned stream's
micro-batch (``PlannedSource.STATIC_PREFIX``): the anti-join is then a stream–static one."""
ROW_BITS = 32
"""Low bits of a row's key that hold its position in the file."""
_NONE = ColumnMapping("none", ())
BROADCAST_ROWS = 1_000_000
"""Deleted rows up to which their anti-join is a broadcast (a hash lookup per scanned row);
beyond, Spark plans it (a sort-merge join rather than a broadcast the driver cannot hold)."""


def spark_schema(table: DeltaTable) -> StructType:
    """The Spark schema of an open delta-rs table, every column nullable as Spark reads it."""
    arrow = as_nullable(table_arrow_schema(table.schema()))
    return from_arrow_schema(arrow, prefer_timestamp_ntz=True)


def files_frame(
    spark: SparkSession,
    root: str,
    files: Sequence[DataFile],
    schema: StructType,
    columns: ColumnMapping = _NONE,
) -> DataFrame | None:
    """The rows of ``files`` in ``schema``'s column order; None for no files."""
    if not files:
        return None
    if columns.by_id:
        spark.conf.set(FIELD_ID_READ, "true")
    groups: dict[tuple[tuple[str, str | None], ...], list[DataFile]] = {}
    for file in files:
        groups.setdefault(tuple(sorted(file.partition_values.items())), []).append(file)
    arrow = to_arrow_schema(schema, timezone="UTC")
    hashes = _name_hashes(spark, root, [f for f in files if f.deletes is not None])
    scans = [
        _scan(spark, root, chunk, dict(key), schema, arrow, columns, hashes)
        for key, members in groups.items()
        for chunk in _chunks(members, hashes)
    ]
    return functools.reduce(DataFrame.unionAll, scans)


def _chunks(files: list[DataFile], hashes: Mapping[str, int]) -> list[list[DataFile]]:
    """The files without deleted rows together; those with, in chunks of distinct name hashes
    (``hashes``, by path: the high bits of their deleted rows' keys)."""
    plain = [f for f in files if f.deletes is None]
    chunks: list[list[DataFile]] = []
    taken: list[set[int]] = []
    for file in files:
        if file.deletes is None:
            continue
        hashed = hashes[file.path]
        for chunk, seen in zip(chunks, taken, strict=True):
            if hashed not in seen:
                chunk.append(file)
                seen.add(hashed)
                break
        else:
            chunks.append([file])
            taken.append({hashed})
    return ([plain] if plain else []) + chunks


def _name_hashes(spark: SparkSession, root: str, files: list[DataFile]) -> dict[str, int]:
    """Spark's ``hash`` of each file's ``_metadata.file_name``, by path: computed by Spark (on
    the driver, a local relation) so that it is the hash the scan computes for every row."""
    if not files:
        return {}
    names = pa.table({"name": [_spark_name(spark, local_path(root, f.path)) for f in files]})
    hashed = spark.createDataFrame(names).select(F.hash("name")).collect()
    return {f.path: int(row[0]) for f, row in zip(files, hashed, strict=True)}


def _scan(
    spark: SparkSession,
    root: str,
    files: list[DataFile],
    partition_values: Mapping[str, str | None],
    schema: StructType,
    arrow: pa.Schema,
    columns: ColumnMapping,
    hashes: Mapping[str, int],
) -> DataFrame:
    stored = [f for f in schema.fields if f.name not in partition_values]
    physical = {f.name: _physical_field(f, columns) for f in stored}
    paths = [local_path(root, f.path) for f in files]
    # Paths are files the log names, never patterns: a '[' in a name must not glob.
    # Hadoop settings given for the table (fs.s3a.*) reach S3A as Spark's per-read options.
    reader = spark.read.options(**storage.given(paths[0]))
    frame = (
        reader.schema(StructType(list(physical.values())))
        .option("__globPaths__", "false")
        .parquet(*paths)
    )
    if files[0].deletes is not None:
        frame = _without_deleted(spark, root, frame, files, hashes)
    return frame.select(
        *[
            _literal(partition_values[f.name], f.dataType, arrow.field(f.name).type).alias(f.name)
            if f.name in partition_values
            else _logical(physical[f.name], f).alias(f.name)
            for f in schema.fields
        ]
    )


def _without_deleted(
    spark: SparkSession,
    root: str,
    frame: DataFrame,
    files: list[DataFile],
    hashes: Mapping[str, int],
) -> DataFrame:
    """``frame`` without the rows the files' deletion vectors delete (their name hashes in
    ``hashes`` are distinct)."""
    keys = pa.array(np.concatenate([_deleted_keys(root, f, hashes[f.path]) for f in files]))
    deleted_frame = spark.createDataFrame(
        pa.table({_KEY: keys}), schema=StructType([StructField(_KEY, LongType())])
    )
    row = F.col("_metadata.row_index")
    marked = frame.select(
        "*",
        F.when(
            row < 1 << ROW_BITS,
            F.shiftleft(F.hash(F.col("_metadata.file_name")).cast(LongType()), ROW_BITS) + row,
        ).alias(_KEY),
    )
    if len(keys) <= BROADCAST_ROWS:
        deleted_frame = F.broadcast(deleted_frame)
    return marked.join(deleted_frame, _KEY, "left_anti")


def _deleted_keys(root: str, file: DataFile, hashed: int) -> np.ndarray:
    """The keys of ``file``'s deleted rows: ``hashed`` (its name's) high, positions low."""
    assert file.deletes is not None
    deleted = dv.positions(root, file.deletes)
    if len(deleted) and int(deleted[-1]) >> ROW_BITS:
        raise DeletionVectorError(
            f"the deletion vector of {file.path} deletes row {int(deleted[-1])}: lakefeed's "
            f"Spark scan reads files of fewer than 2^{ROW_BITS} rows",
            fix="read the table with lakefeed's Python reader "
            "(option lakefeed.reader=python), or rewrite the file smaller (OPTIMIZE)",
            code=DV_CORRUPT,
        )
    return (np.int64(hashed) << ROW_BITS) + deleted.astype(np.int64)


def _spark_name(spark: SparkSession, path: str) -> str:
    """The file's name as Spark's ``_metadata.file_name`` spells it: the last segment of
    Hadoop's URI of the path, percent-encoded (``part a.parquet`` is ``part%20a.parquet``)."""
    jvm = spark._jvm
    assert jvm is not None  # Spark's own scan runs only in a classic (JVM) session
    return str(jvm.org.apache.hadoop.fs.Path(path).toUri().getRawPath()).rsplit("/", 1)[-1]


def _physical_field(field: StructField, columns: ColumnMapping) -> StructField:
    """``field`` as the files store it: physical names, field ids (mode ``id``)."""
    if not columns.active:
        return field
    mapped = next(c for c in columns.columns if c.name == field.name)
    return _physical(field, mapped, columns.by_id)


def _physical(field: StructField, mapped: Mapped, by_id: bool) -> StructField:
    metadata = {"parquet.field.id": mapped.id} if by_id and mapped.id is not None else {}
    return StructField(
        mapped.physical, _physical_type(field.dataType, mapped, by_id), True, metadata
    )


def _physical_type(dtype: DataType, mapped: Mapped, by_id: bool) -> DataType:
    if isinstance(dtype, StructType):
        return StructType(
            [_physical(f, mapped.child(f.name) or _plain(f.name), by_id) for f in dtype.fields]
        )
    if isinstance(dtype, ArrayType):
        element = mapped.child("element") or _plain("element")
        return ArrayType(_physical_type(dtype.elementType, element, by_id), dtype.containsNull)
    if isinstance(dtype, MapType):
        key = _physical_type(dtype.keyType, mapped.child("key") or _plain("key"), by_id)
        value = _physical_type(dtype.valueType, mapped.child("value") or _plain("value"), by_id)
        return MapType(key, value, dtype.valueContainsNull)
    return dtype


def _plain(name: str) -> Mapped:
    return Mapped(name, name, None)


def _logical(physical: StructField, logical: StructField) -> Column:
    """A stored column under its logical name; nested types cast (by position) to their
    logical field names."""
    column = F.col(f"`{physical.name}`")
    if physical.dataType != logical.dataType:
        column = column.cast(logical.dataType)
    return column


def _literal(text: str | None, dtype: DataType, arrow_type: pa.DataType) -> Column:
    """A partition value as Spark's typed literal, parsed as the Python reader parses it."""
    value = parse_partition_value(text, arrow_type)
    if value is None:
        return F.lit(None).cast(dtype)
    if isinstance(dtype, TimestampNTZType):
        return F.lit(value.isoformat(sep=" ")).cast(dtype)  # no time zone may touch it
    return F.lit(value).cast(dtype)
