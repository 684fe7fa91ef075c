"""A Delta table's protocol (reader/writer versions, table features) and converting Parquet
folders into Delta tables: delta-spark's ``upgradeTableProtocol``, ``addFeatureSupport`` and
``convertToDelta``, over delta-rs.

A feature is only added when lakefeed can still read and write the table afterwards: features
whose readers must do more than read Parquet files (deletion vectors, column mapping) or whose
writers must add to every commit (row tracking) are refused with what to do instead.
"""

from __future__ import annotations

import re

from deltalake import DeltaTable as RsTable
from deltalake import Schema as RsSchema
from deltalake import TableFeatures, convert_to_deltalake
from pyspark.sql import types as T

from lakefeed.delta.builder import UNSUPPORTED
from lakefeed.delta.tables import DeltaOperationError, commit_properties, run_rs
from lakefeed.errors import register_code

DOWNGRADE = register_code("DELTA_INVALID_PROTOCOL_DOWNGRADE", DeltaOperationError)
BAD_VERSION = register_code("DELTA_UNSUPPORTED_PROTOCOL_VERSION", DeltaOperationError)
BAD_FEATURE = register_code("DELTA_UNSUPPORTED_FEATURES_IN_CONFIG", DeltaOperationError)
NOT_PARQUET = register_code("DELTA_CONVERT_NON_PARQUET_TABLE", DeltaOperationError)

MAX_READER, MAX_WRITER = 3, 7
# Delta's feature names (PROTOCOL.md) to delta-rs's, for the features lakefeed keeps working with.
FEATURES = {
    "appendOnly": TableFeatures.AppendOnly,
    "invariants": TableFeatures.Invariants,
    "checkConstraints": TableFeatures.CheckConstraints,
    "changeDataFeed": TableFeatures.ChangeDataFeed,
    "generatedColumns": TableFeatures.GeneratedColumns,
    "identityColumns": TableFeatures.IdentityColumns,
    "timestampNtz": TableFeatures.TimestampWithoutTimezone,
    "domainMetadata": TableFeatures.DomainMetadata,
    "v2Checkpoint": TableFeatures.V2Checkpoint,
}
REFUSED = {
    "deletionVectors": "lakefeed reads a table's Parquet files and cannot apply deletion vectors",
    "columnMapping": "lakefeed reads Parquet columns by name and cannot apply column mapping",
    "rowTracking": "lakefeed's writers do not assign row ids to the files they commit",
}
_PARQUET_IDENTIFIER = re.compile(r"^parquet\.`(.+)`$", re.IGNORECASE)


def upgrade(table: RsTable, root: str, reader: int, writer: int) -> None:
    """Raise the table's protocol to ``(reader, writer)``; never lower (Delta's rule)."""
    protocol = table.protocol()
    if reader < protocol.min_reader_version or writer < protocol.min_writer_version:
        raise DeltaOperationError(
            f"protocol version cannot be downgraded from ({protocol.min_reader_version}, "
            f"{protocol.min_writer_version}) to ({reader}, {writer})",
            fix="give versions at least the table's current ones (DeltaTable.detail() shows them)",
            code=DOWNGRADE,
        )
    if not 1 <= reader <= MAX_READER or not 2 <= writer <= MAX_WRITER:
        raise DeltaOperationError(
            f"protocol ({reader}, {writer}) is not one Delta defines: reader versions go up to "
            f"{MAX_READER}, writer versions from 2 up to {MAX_WRITER}",
            fix="use reader 1-3 and writer 2-7",
            code=BAD_VERSION,
        )
    if reader == MAX_READER and writer < MAX_WRITER:
        raise DeltaOperationError(
            "reader version 3 (table features) needs writer version 7",
            fix="upgradeTableProtocol(3, 7)",
            code=BAD_VERSION,
        )
    wanted = {
        "delta.minReaderVersion": str(reader),
        "delta.minWriterVersion": str(writer),
    }
    run_rs(
        "UPGRADE PROTOCOL",
        root,
        lambda: table.alter.set_table_properties(wanted, commit_properties=commit_properties(None)),
    )


def add_feature(table: RsTable, root: str, name: str) -> None:
    """Add support for the feature Delta calls ``name`` (the protocol goes to table features)."""
    if name in REFUSED:
        raise DeltaOperationError(
            f"table feature {name!r} is not supported by lakefeed: {REFUSED[name]}",
            fix="leave the feature off; tables with it need Spark with delta-spark",
            code=UNSUPPORTED,
        )
    feature = FEATURES.get(name)
    if feature is None:
        raise DeltaOperationError(
            f"unsupported table feature {name!r}",
            fix=f"use one of Delta's feature names lakefeed supports: {', '.join(FEATURES)}",
            code=BAD_FEATURE,
        )
    run_rs(
        "ADD FEATURE",
        root,
        lambda: table.alter.add_feature(
            feature,
            allow_protocol_versions_increase=True,
            commit_properties=commit_properties(None),
        ),
    )


def parquet_folder(identifier: str) -> str:
    """The folder of delta-spark's ``parquet.`path``` identifier; anything else is refused."""
    match = _PARQUET_IDENTIFIER.match(identifier.strip())
    if match is None:
        raise DeltaOperationError(
            f"convertToDelta takes a Parquet folder as parquet.`/path`, not {identifier!r}",
            fix="name the folder as parquet.`/path/to/folder` (only Parquet can be converted)",
            code=NOT_PARQUET,
        )
    return match.group(1)


def convert(root: str, partition_schema: str | T.StructType | None) -> None:
    """Write a Delta log over the Parquet files under ``root`` (hive-style partition folders
    typed by ``partition_schema``, a DDL string or StructType); one commit, stats from the
    footers."""
    schema = _partition_schema(partition_schema)
    run_rs(
        "CONVERT",
        root,
        lambda: convert_to_deltalake(
            root,
            mode="ignore",  # as Delta: converting a Delta table is a no-op
            partition_by=schema,
            partition_strategy="hive" if schema is not None else None,
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
