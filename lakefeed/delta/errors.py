"""The Delta engine's errors and codes, registered once here and imported where they are raised
(the base classes are :mod:`lakefeed.core.errors`'s)."""

from __future__ import annotations

from lakefeed.core.errors import (
    ConfigError,
    ConflictError,
    DataLossRiskError,
    DeltaError,
    register_code,
)


class ChangeFeedError(DeltaError, ValueError):
    """A change feed read that cannot be served as asked."""

    code = "DELTA_CHANGE_DATA_FEED"


class DeletionVectorError(DeltaError):
    """A deletion vector that cannot be read as the protocol describes it."""

    code = "DELTA_DELETION_VECTOR"


class DeltaSourceError(DeltaError):
    """A Delta table a stream cannot read as asked; the message says what to do."""

    code = "DELTA_SOURCE"


class SchemaMismatchError(DeltaError, ValueError):
    """A write whose schema the table cannot take as it is."""

    code = "DELTA_SCHEMA_MISMATCH"


# commits
NOT_NULL = register_code("DELTA_NOT_NULL_CONSTRAINT_VIOLATED", SchemaMismatchError)
MISSING_NOT_NULL = register_code("DELTA_MISSING_NOT_NULL_COLUMN_VALUE", SchemaMismatchError)
CONSTRAINTS_CHANGED = register_code("DELTA_CONSTRAINTS_CHANGED", ConflictError)
PARTITION_NOT_FOUND = register_code("DELTA_PARTITION_COLUMN_NOT_FOUND", SchemaMismatchError)
# CHECK constraints and generated columns
VIOLATION = register_code("DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", SchemaMismatchError)
NEW_VIOLATION = register_code("DELTA_NEW_CHECK_CONSTRAINT_VIOLATION", DeltaError)
PYTHON_SINK = register_code("DELTA_GENERATED_COLUMNS_NEED_SPARK_WRITER", SchemaMismatchError)
MISSING_INPUT = register_code("DELTA_GENERATED_COLUMN_INPUT_MISSING", SchemaMismatchError)
# reading the log, the files and the table's history
DV_CORRUPT = register_code("DELTA_DELETION_VECTOR_CORRUPT", DeletionVectorError)
OTHER_TABLE = register_code("DELTA_SOURCE_OTHER_TABLE", DeltaSourceError)
READER_FEATURE = register_code("DELTA_UNSUPPORTED_READER_FEATURE", DeltaSourceError)
CHECKPOINT_BEHIND = register_code("CHECKPOINT_BEHIND_TABLE", DataLossRiskError)
TABLE_REPLACED = register_code("DELTA_TABLE_REPLACED", DataLossRiskError)
# table settings and what lakefeed does not do
UNKNOWN_CONFIGURATION = register_code("DELTA_UNKNOWN_CONFIGURATION", ConfigError)
FEATURE_UNSUPPORTED = register_code("DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED", DeltaError)
REPLACE_WHERE_MISMATCH = register_code("DELTA_REPLACE_WHERE_MISMATCH", DeltaError)
UNSUPPORTED = register_code("DELTA_UNSUPPORTED_BY_LAKEFEED", DeltaError)
BAD_FEATURE = register_code("DELTA_UNSUPPORTED_FEATURES_IN_CONFIG", DeltaError)
