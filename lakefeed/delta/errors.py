"""The Delta engine's errors and codes, registered once here and imported where they are raised
(the base classes are :mod:`lakefeed.core.errors`'s).

They live with the engine (every caller of it may meet them); delta-spark's surface
(:mod:`lakefeed.compat.delta_spark`) raises and re-exports the same classes and codes.
"""

from __future__ import annotations

from typing import NoReturn

from deltalake.exceptions import DeltaError as RsDeltaError

from lakefeed.core.errors import (
    ConfigError,
    ConflictError,
    DataLossRiskError,
    DeltaError,
    OptionError,
    register_code,
)


class DeltaTableNotFoundError(DeltaError):
    """``forPath``/``forName`` on something that is not a Delta table."""

    code = "DELTA_TABLE_NOT_FOUND"


class DeltaOperationError(DeltaError):
    """delta-rs refused an operation (bad condition, type mismatch, ...)."""

    code = "DELTA_OPERATION"


class MergeMultipleMatchesError(DeltaError):
    """Several source rows matched one target row that an update or delete clause changes."""

    code = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"


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


class DeltaOptionError(OptionError):
    """An option of ``format("delta")`` that is missing, malformed or contradicts another."""

    code = "DELTA_OPTION"


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
VERSION_NOT_FOUND = register_code("DELTA_VERSION_NOT_FOUND", DeltaOptionError)
DV_CORRUPT = register_code("DELTA_DELETION_VECTOR_CORRUPT", DeletionVectorError)
OTHER_TABLE = register_code("DELTA_SOURCE_OTHER_TABLE", DeltaSourceError)
READER_FEATURE = register_code("DELTA_UNSUPPORTED_READER_FEATURE", DeltaSourceError)
CHECKPOINT_BEHIND = register_code("CHECKPOINT_BEHIND_TABLE", DataLossRiskError)
TABLE_REPLACED = register_code("DELTA_TABLE_REPLACED", DataLossRiskError)
# table settings and what lakefeed does not do
UNKNOWN_CONFIGURATION = register_code("DELTA_UNKNOWN_CONFIGURATION", ConfigError)
FEATURE_UNSUPPORTED = register_code("DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED", DeltaError)
REPLACE_WHERE_MISMATCH = register_code("DELTA_REPLACE_WHERE_MISMATCH", DeltaError)
UNSUPPORTED = register_code("DELTA_UNSUPPORTED_BY_LAKEFEED", DeltaOperationError)
BAD_FEATURE = register_code("DELTA_UNSUPPORTED_FEATURES_IN_CONFIG", DeltaOperationError)
# creating a table (create.py): its columns, partitioning and generated columns
NO_SCHEMA = register_code("DELTA_SCHEMA_NOT_PROVIDED", DeltaOperationError)
ALL_COLUMNS_PARTITION = register_code(
    "DELTA_CANNOT_USE_ALL_COLUMNS_FOR_PARTITION", DeltaOperationError
)
DUPLICATE_COLUMNS = register_code("DELTA_DUPLICATE_COLUMNS_FOUND", DeltaOperationError)
CLUSTER_BY_PARTITIONED = register_code("DELTA_CLUSTER_BY_WITH_PARTITIONED_BY", DeltaOperationError)
CLUSTER_BY_COLUMNS = register_code("DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS", DeltaOperationError)
CLUSTER_BY_STATS = register_code("DELTA_CLUSTERING_COLUMN_MISSING_STATS", DeltaOperationError)
CLUSTERING_WITH_ZORDER = register_code(
    "DELTA_CLUSTERING_WITH_ZORDER_BY",
    DeltaOperationError,
    "OPTIMIZE ... ZORDER BY on a liquid-clustered table: OPTIMIZE clusters it by its clustering "
    "columns",
)
CANNOT_RESTORE = register_code(
    "DELTA_CANNOT_RESTORE_TABLE_VERSION",
    DeltaOperationError,
    "RESTORE to a version the table's log does not hold, or whose data files are gone",
)
GENERATED_EXPRESSION = register_code(
    "DELTA_UNSUPPORTED_EXPRESSION_GENERATED_COLUMN",
    DeltaOperationError,
    "A generated column's expression uses what Delta cannot compute from its row alone "
    "(a subquery, a window, ...).",
)
GENERATED_REFERENCE = register_code(
    "DELTA_INVALID_GENERATED_COLUMN_REFERENCES",
    DeltaOperationError,
    "A generated column's expression names a column the table lacks, or another generated column.",
)
GENERATED_UDF = register_code(
    "DELTA_UDF_IN_GENERATED_COLUMN",
    DeltaOperationError,
    "A generated column's expression calls a user-defined function, which a writer checking "
    "the column could not run. Fix: write the expression with Spark's built-in functions, or "
    "compute the value in the flow and store it in a plain column.",
)
GENERATED_NON_DETERMINISTIC = register_code(
    "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN",
    DeltaOperationError,
    "A generated column's expression is non-deterministic (rand(), current_timestamp(), ...): "
    "a written value could not be checked. Fix: compute the value in the flow and store it in "
    "a plain column.",
)
GENERATED_AGGREGATE = register_code(
    "DELTA_AGGREGATE_IN_GENERATED_COLUMN",
    DeltaOperationError,
    "A generated column's expression aggregates (sum, count, ...): a generated value comes "
    "from its own row. Fix: aggregate in a materialized view over the table instead.",
)
GENERATED_TYPE_MISMATCH = register_code(
    "DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH", DeltaOperationError
)
# identity columns (identity.py)
IDENTITY_EXPLICIT_INSERT = register_code(
    "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED", DeltaOperationError
)
IDENTITY_UPDATE = register_code("DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED", DeltaOperationError)
IDENTITY_TYPE = register_code("DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE", DeltaOperationError)
IDENTITY_STEP_ZERO = register_code("DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP", DeltaOperationError)
IDENTITY_MARK_MOVED = register_code(
    "DELTA_IDENTITY_HIGH_WATER_MARK_MOVED",
    ConflictError,
    "Another writer generated identity values (moved the column's high water mark) while this "
    "write generated its own: retrying generates them after the new mark.",
)
IDENTITY_NO_STATS = register_code(
    "DELTA_IDENTITY_COLUMN_STATS_MISSING",
    DeltaOperationError,
    "A written file lacks the statistics of an identity column, which its high water mark is "
    "moved from.",
)
# CHECK constraints added and dropped (operations.py)
CONSTRAINT_EXISTS = register_code("DELTA_CONSTRAINT_ALREADY_EXISTS", DeltaOperationError)
CONSTRAINT_MISSING = register_code("DELTA_CONSTRAINT_DOES_NOT_EXIST", DeltaOperationError)
# protocol versions (upgrade.py)
PROTOCOL_DOWNGRADE = register_code("DELTA_INVALID_PROTOCOL_DOWNGRADE", DeltaOperationError)
PROTOCOL_VERSION = register_code("DELTA_UNSUPPORTED_PROTOCOL_VERSION", DeltaOperationError)
# schema changes under column mapping (alter.py)
RENAME_UNSUPPORTED = register_code(
    "DELTA_UNSUPPORTED_RENAME_COLUMN",
    DeltaOperationError,
    "ALTER TABLE ... RENAME COLUMN on a table without column mapping. Fix: turn it on first "
    "with SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name') (metadata only).",
)
DROP_UNSUPPORTED = register_code(
    "DELTA_UNSUPPORTED_DROP_COLUMN",
    DeltaOperationError,
    "ALTER TABLE ... DROP COLUMN on a table without column mapping, of a partition column, "
    "or of a struct's last field. Fix: turn column mapping on first (SET TBLPROPERTIES "
    "('delta.columnMapping.mode' = 'name')); a partition column or a struct's last field: "
    "overwrite the table without it (overwriteSchema=true).",
)
MODE_CHANGE = register_code("DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE", DeltaOperationError)
COLUMN_MISSING = register_code("DELTA_COLUMN_NOT_FOUND", DeltaOperationError)
COLUMN_EXISTS = register_code("DELTA_COLUMN_ALREADY_EXISTS", DeltaOperationError)
DEPENDENT = register_code("DELTA_DEPENDENT_COLUMN_CHANGE", DeltaOperationError)

# delta-rs's wording for its check of the MERGE rule above (it has no error class of its own).
_DUPLICATE_MATCH = "matched a target row with multiple source rows"


def translate_merge_error(error: RsDeltaError) -> DeltaError | None:
    """delta-rs's duplicate-match failure as :class:`MergeMultipleMatchesError`, else None."""
    if _DUPLICATE_MATCH in str(error):
        return MergeMultipleMatchesError(
            f"the MERGE source has several rows matching one target row: {error}",
            fix="deduplicate the source on the merge keys (e.g. keep the latest row per key)",
        )
    return None


def unsupported(call: str, why: str, fix: str) -> NoReturn:
    """Refuse ``call``, which lakefeed cannot honour (``DELTA_UNSUPPORTED_BY_LAKEFEED``)."""
    raise DeltaOperationError(
        f"{call} is not supported by lakefeed: {why}", fix=fix, code=UNSUPPORTED
    )
