"""delta-spark's protocol calls and converting Parquet folders into Delta tables:
``upgradeTableProtocol``, ``addFeatureSupport`` (the engine's :mod:`lakefeed.delta.upgrade`,
whose names are re-exported here) and ``convertToDelta``, over delta-rs.
"""

from __future__ import annotations

from deltalake import Schema as RsSchema
from deltalake import convert_to_deltalake
from pyspark.sql import types as T

from lakefeed.compat.delta_spark.errors import NOT_PARQUET, DeltaSqlError
from lakefeed.compat.delta_spark.sql.parse import path_identifier
from lakefeed.core import storage
from lakefeed.delta.errors import UNSUPPORTED, DeltaOperationError
from lakefeed.delta.operations import commit_properties, run
from lakefeed.delta.properties import FEATURES, REFUSED
from lakefeed.delta.upgrade import (
    add_feature,
    check_properties,
    upgrade,
)

__all__ = [
    "FEATURES",
    "REFUSED",
    "UNSUPPORTED",
    "add_feature",
    "check_properties",
    "convert",
    "parquet_folder",
    "upgrade",
]


def parquet_folder(identifier: str) -> str:
    """The folder of delta-spark's ``parquet.`path``` identifier; anything else is refused."""
    folder = path_identifier(identifier, "parquet")
    if folder is None:
        raise DeltaSqlError(
            f"convertToDelta takes a Parquet folder as parquet.`/path`, not {identifier!r}",
            fix="name the folder as parquet.`/path/to/folder` (only Parquet can be converted)",
            code=NOT_PARQUET,
        )
    return folder


def convert(root: str, partition_schema: str | T.StructType | None) -> None:
    """Write a Delta log over the Parquet files under ``root`` (hive-style partition folders
    typed by ``partition_schema``, a DDL string or StructType); one commit, stats from the
    footers."""
    schema = _partition_schema(partition_schema)
    run(
        "CONVERT",
        root,
        lambda: convert_to_deltalake(
            root,
            mode="ignore",  # as Delta: converting a Delta table is a no-op
            partition_by=schema,
            partition_strategy="hive" if schema is not None else None,
            storage_options=storage.delta_options(root),
            commit_properties=commit_properties(None),
        ),
    )


def _partition_schema(schema: str | T.StructType | None) -> RsSchema | None:
    if schema is None:
        return None
    struct = schema if isinstance(schema, T.StructType) else T.StructType.fromDDL(schema)
    if not isinstance(struct, T.StructType):
        raise DeltaOperationError(
            f"partitionSchema {schema!r} is not a list of columns",
            fix='give it as "part int, day date" or a StructType',
        )
    return RsSchema.from_json(struct.json())
