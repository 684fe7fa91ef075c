"""The delta-spark look-alike's errors: its own (SQL text, expressions) registered here, and the
engine's it raises too (:mod:`lakefeed.delta.errors`), under the names delta-spark code imports."""

from __future__ import annotations

from lakefeed.core.errors import DeltaError, register_code
from lakefeed.delta.errors import (
    DeltaOperationError,
    DeltaTableNotFoundError,
    MergeMultipleMatchesError,
)

__all__ = [
    "DeltaOperationError",
    "DeltaSqlError",
    "DeltaTableNotFoundError",
    "ExpressionError",
    "MergeMultipleMatchesError",
]


class DeltaSqlError(DeltaError, ValueError):
    """Delta SQL text lakefeed cannot read, or a Delta statement it cannot run."""

    code = "DELTA_SQL"


class ExpressionError(DeltaError, ValueError):
    """A condition or value that cannot be handed to the Delta engine."""

    code = "DELTA_EXPRESSION"


# Delta SQL (sql/parse.py, sql/run.py)
NOT_PARQUET = register_code("DELTA_CONVERT_NON_PARQUET_TABLE", DeltaSqlError)
UNSUPPORTED_SQL = register_code("DELTA_SQL_UNSUPPORTED_BY_LAKEFEED", DeltaSqlError)
UNREADABLE = register_code("DELTA_SQL_UNREADABLE", DeltaSqlError)
ARITY = register_code("INSERT_COLUMN_ARITY_MISMATCH", DeltaSqlError)
# DeltaTable (tables.py)
UNKNOWN_GENERATE_MODE = register_code("DELTA_MODE_NOT_SUPPORTED", DeltaOperationError)
DEEP_CLONE = register_code("DELTA_UNSUPPORTED_DEEP_CLONE", DeltaOperationError)
PRIVATE_TABLE = register_code("TABLE_PRIVATE", DeltaTableNotFoundError)
# DeltaTableBuilder / DeltaColumnBuilder (builder.py)
ALREADY_EXISTS = register_code("DELTA_TABLE_ALREADY_EXISTS", DeltaOperationError)
MISSING_TABLE = register_code("DELTA_CANNOT_REPLACE_MISSING_TABLE", DeltaTableNotFoundError)
NO_NAME = register_code("DELTA_CREATE_TABLE_MISSING_TABLE_NAME_OR_LOCATION", DeltaOperationError)
MISMATCH = register_code("DELTA_CREATE_TABLE_IDENTIFIER_LOCATION_MISMATCH", DeltaOperationError)
NOT_EMPTY = register_code("DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION", DeltaOperationError)
NO_DATA_TYPE = register_code("DELTA_COLUMN_BUILDER_MISSING_DATA_TYPE", DeltaOperationError)
