"""Delta data files as a DataFrame of Spark's own Parquet reader: no row passes through Python.

The stream source plans in Python (offsets, change checks, limits) and hands Spark a batch as
this DataFrame (see :mod:`lakefeed.jvm`). Partition values are not in Delta's files: each group
of files with the same values becomes one Parquet scan with those values as literals, so a
filter on a partition column lets Spark's optimizer drop whole groups.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, StructType, TimestampNTZType

from lakefeed import storage
from lakefeed.connectors.delta.files import local_path, parse_partition_value
from lakefeed.connectors.delta.log import DataFile


def files_frame(
    spark: SparkSession, root: str, files: Sequence[DataFile], schema: StructType
) -> DataFrame | None:
    """The rows of ``files`` in ``schema``'s column order; None for no files."""
    if not files:
        return None
    groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
    for file in files:
        key = tuple(sorted(file.partition_values.items()))
        groups.setdefault(key, []).append(local_path(root, file.path))
    arrow = to_arrow_schema(schema, timezone="UTC")
    scans = [_scan(spark, paths, dict(key), schema, arrow) for key, paths in groups.items()]
    return functools.reduce(DataFrame.unionAll, scans)


def _scan(
    spark: SparkSession,
    paths: list[str],
    partition_values: Mapping[str, str | None],
    schema: StructType,
    arrow: pa.Schema,
) -> DataFrame:
    stored = StructType([f for f in schema.fields if f.name not in partition_values])
    # Paths are files the log names, never patterns: a '[' in a name must not glob.
    # Hadoop settings given for the table (fs.s3a.*) reach S3A as Spark's per-read options.
    reader = spark.read.options(**storage.given(paths[0]))
    frame = reader.schema(stored).option("__globPaths__", "false").parquet(*paths)
    return frame.select(
        *[
            _literal(partition_values[f.name], f.dataType, arrow.field(f.name).type).alias(f.name)
            if f.name in partition_values
            else F.col(f"`{f.name}`")
            for f in schema.fields
        ]
    )


def _literal(text: str | None, dtype: DataType, arrow_type: pa.DataType) -> Column:
    """A partition value as Spark's typed literal, parsed as the Python reader parses it."""
    value = parse_partition_value(text, arrow_type)
    if value is None:
        return F.lit(None).cast(dtype)
    if isinstance(dtype, TimestampNTZType):
        return F.lit(value.isoformat(sep=" ")).cast(dtype)  # no time zone may touch it
    return F.lit(value).cast(dtype)
