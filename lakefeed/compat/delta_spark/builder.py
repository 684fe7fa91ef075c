"""delta-spark's table builder: ``DeltaTable.create/createIfNotExists/replace/createOrReplace``.

The same calls, argument checks and outcomes as ``delta.tables.DeltaTableBuilder`` (Delta's
``CREATE TABLE`` / ``REPLACE TABLE``), written as one delta-rs commit::

    DeltaTable.createIfNotExists(spark) \\
        .tableName("events") \\
        .addColumn("id", "BIGINT", nullable=False, comment="event id") \\
        .addColumn("day", DateType()) \\
        .partitionedBy("day") \\
        .property("delta.appendOnly", "true") \\
        .execute()

A replace is one commit with the new metadata that removes every file, history kept.

Generated columns (``generatedAlwaysAs="CAST(eventTime AS DATE)"``) are recorded as Delta does
(field metadata ``delta.generationExpression``; delta-rs gives the table writer version 4), after
Spark analyses each expression over the other columns and finds the column's type: every lakefeed
write then computes them (:mod:`lakefeed.delta.generated`). Identity columns
(``generatedAlwaysAsIdentity``, ``generatedByDefaultAsIdentity``) are recorded as Delta does too
(``delta.identity.*``, the ``identityColumns`` writer feature): lakefeed's writes assign them
(:mod:`lakefeed.delta.identity`). ``clusterBy`` makes a clustered table
(:mod:`lakefeed.delta.clustering`), never with ``partitionedBy`` (Delta's
``DELTA_CLUSTER_BY_WITH_PARTITIONED_BY``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakefeed.compat.delta_spark.errors import (
    ALREADY_EXISTS,
    MISMATCH,
    MISSING_TABLE,
    NO_DATA_TYPE,
    NO_NAME,
    NOT_EMPTY,
)
from lakefeed.compat.delta_spark.sql.parse import path_identifier
from lakefeed.compat.delta_spark.tables import DeltaTable, _local, _table_path
from lakefeed.core import storage
from lakefeed.delta import log
from lakefeed.delta.create import check_new, create
from lakefeed.delta.errors import DeltaOperationError, DeltaTableNotFoundError
from lakefeed.delta.generated import GENERATION_EXPRESSION
from lakefeed.delta.identity import EXPLICIT_INSERT, START, STEP


def _type_error(message: str, objs: Iterable[Any]) -> NoReturn:
    """delta-spark's ``_raise_type_error``: the message, then each offending value and type."""
    for obj in objs:
        message += f" Found {obj} with type {type(obj)}"
    raise TypeError(message)


def _data_type(data_type: str | T.DataType) -> T.DataType:
    return data_type if isinstance(data_type, T.DataType) else T.DataType.fromDDL(data_type)


@dataclass
class IdentityGenerator:
    """delta-spark's identity column spec (``start``, ``step``)."""

    start: int = 1
    step: int = 1


class DeltaColumnBuilder:
    """``DeltaTable.columnBuilder(spark, name)``: one column, built into a ``StructField``."""

    def __init__(self, spark: SparkSession, name: str) -> None:
        self._spark = spark
        self._name = name
        self._type: T.DataType | None = None
        self._nullable = True
        self._metadata: dict[str, Any] = {}

    def dataType(self, dataType: str | T.DataType) -> DeltaColumnBuilder:
        self._type = _data_type(dataType)
        return self

    def nullable(self, nullable: bool) -> DeltaColumnBuilder:
        self._nullable = nullable
        return self

    def generatedAlwaysAs(self, expression: str) -> DeltaColumnBuilder:
        self._metadata[GENERATION_EXPRESSION] = expression
        return self

    def generatedAlwaysAsIdentity(self, start: int = 1, step: int = 1) -> DeltaColumnBuilder:
        return self._identity(start, step, explicit_insert=False)

    def generatedByDefaultAsIdentity(self, start: int = 1, step: int = 1) -> DeltaColumnBuilder:
        return self._identity(start, step, explicit_insert=True)

    def _identity(self, start: int, step: int, explicit_insert: bool) -> DeltaColumnBuilder:
        self._metadata |= {
            START: start,
            STEP: step,
            EXPLICIT_INSERT: explicit_insert,
        }
        return self

    def comment(self, comment: str) -> DeltaColumnBuilder:
        self._metadata["comment"] = comment
        return self

    def build(self) -> T.StructField:
        if self._type is None:
            raise DeltaOperationError(
                f"the data type of the column `{self._name}` was not provided",
                fix="call .dataType(...) before .build()",
                code=NO_DATA_TYPE,
            )
        return T.StructField(self._name, self._type, self._nullable, dict(self._metadata))


class DeltaTableBuilder:
    """How to create or replace a Delta table (see the module doc); from ``DeltaTable.create``,
    ``createIfNotExists``, ``replace`` or ``createOrReplace``."""

    def __init__(self, spark: SparkSession, mode: str) -> None:
        self._spark = spark
        self._mode = mode
        self._identifier: str | None = None
        self._location: str | None = None
        self._comment: str | None = None
        self._columns: list[T.StructField] = []
        self._partitioned_by: list[str] = []
        self._clustered_by: list[str] | None = None
        self._properties: dict[str, str] = {}

    def tableName(self, identifier: str) -> DeltaTableBuilder:
        """The table's name, resolved like :meth:`DeltaTable.forName` (``delta.`/path```
        names a path)."""
        if type(identifier) is not str:
            _type_error("Identifier must be str.", [identifier])
        self._identifier = identifier
        return self

    def location(self, location: str) -> DeltaTableBuilder:
        """The table's folder; with a name too, the table is here (as Delta's external table)."""
        if type(location) is not str:
            _type_error("Location must be str.", [location])
        self._location = location
        return self

    def comment(self, comment: str) -> DeltaTableBuilder:
        """The table comment (Delta's ``metaData.description``)."""
        if type(comment) is not str:
            _type_error("Table comment must be str.", [comment])
        self._comment = comment
        return self

    def addColumn(
        self,
        colName: str,
        dataType: str | T.DataType,
        nullable: bool = True,
        generatedAlwaysAs: str | IdentityGenerator | None = None,
        generatedByDefaultAs: IdentityGenerator | None = None,
        comment: str | None = None,
    ) -> DeltaTableBuilder:
        """One column: a DDL type string (``"BIGINT"``, ``"ARRAY<STRING>"``) or a DataType."""
        if type(colName) is not str:
            _type_error("Column name must be str.", [colName])
        if type(dataType) is not str and not isinstance(dataType, T.DataType):
            _type_error("Column data type must be str or DataType.", [dataType])
        column = DeltaColumnBuilder(self._spark, colName).dataType(dataType)
        if type(nullable) is not bool:
            _type_error("Column nullable must be bool.", [nullable])
        column.nullable(nullable)
        _generation(column, generatedAlwaysAs, generatedByDefaultAs)
        if comment is not None:
            if type(comment) is not str:
                _type_error("Column comment must be str.", [comment])
            column.comment(comment)
        self._columns.append(column.build())
        return self

    def addColumns(self, cols: T.StructType | list[T.StructField]) -> DeltaTableBuilder:
        """The columns of an existing schema (``df.schema``) or a list of StructFields."""
        if isinstance(cols, list):
            for col in cols:
                if type(col) is not T.StructField:
                    _type_error("Column in existing schema must be StructField.", [col])
            cols = T.StructType(cols)
        if type(cols) is not T.StructType:
            _type_error("Schema must be StructType or a list of StructField.", [cols])
        self._columns.extend(cols.fields)
        return self

    def partitionedBy(self, *cols: str | list[str] | tuple[str, ...]) -> DeltaTableBuilder:
        self._partitioned_by = _names(cols, "Partitioning column must be str.")
        return self

    def clusterBy(self, *cols: str | list[str] | tuple[str, ...]) -> DeltaTableBuilder:
        """Liquid clustering by these columns (checked at ``execute()``, as Delta does)."""
        self._clustered_by = _names(cols, "Clustering column must be str.")
        return self

    def property(self, key: str, value: str) -> DeltaTableBuilder:
        if type(key) is not str or type(value) is not str:
            _type_error("Key and value of property must be string.", [key, value])
        self._properties[key] = value
        return self

    def execute(self) -> DeltaTable:
        """Create or replace the table as asked (one commit), then return it."""
        path, exists = self._target()
        if exists and self._mode == "createIfNotExists":
            return DeltaTable.forPath(self._spark, path)
        schema = self._checked_schema()
        if not exists and storage.list_names(path):
            raise DeltaOperationError(
                f"cannot create table {self._display()}: its location {path} is not empty and "
                "also not a Delta table",
                fix="convert the Parquet there with DeltaTable.convertToDelta, or pick an empty "
                "location",
                code=NOT_EMPTY,
            )
        create(
            path,
            schema,
            partition_by=self._partitioned_by,
            description=self._comment,
            configuration=self._properties,
            replace=exists,
            cluster_by=self._clustered_by or (),
        )
        return DeltaTable.forPath(self._spark, path)

    def _target(self) -> tuple[str, bool]:
        """The table's folder and whether a table is there, after refusing what the mode
        forbids (SQL's ``CREATE TABLE ... AS SELECT`` writes its rows there instead)."""
        path = self._path()
        exists = log.is_delta_table(path)
        if exists and self._mode == "create":
            raise DeltaOperationError(
                f"table {self._display()} already exists (at {path})",
                fix="use DeltaTable.createIfNotExists, replace or createOrReplace",
                code=ALREADY_EXISTS,
            )
        if not exists and self._mode == "replace":
            raise DeltaTableNotFoundError(
                f"table {self._display()} cannot be replaced as it does not exist (at {path})",
                fix="use DeltaTable.createOrReplace to create it",
                code=MISSING_TABLE,
            )
        return path, exists

    def _path(self) -> str:
        """The table's folder: Delta's rules for a name, a location, or both."""
        if self._identifier is None and self._location is None:
            raise DeltaOperationError(
                "table name or location has to be specified",
                fix="call .tableName(name) or .location(path) before .execute()",
                code=NO_NAME,
            )
        named = path_identifier(self._identifier or "")
        if named is not None and self._location is not None and named != self._location:
            raise DeltaOperationError(
                f"creating path-based Delta table with a different location isn't supported. "
                f"Identifier: {self._identifier}, Location: {self._location}",
                fix="give either delta.`path` as the name or the location, not two paths",
                code=MISMATCH,
            )
        if self._location is not None:
            return _local(self._location)
        assert self._identifier is not None
        return _local(named) if named is not None else _table_path(self._spark, self._identifier)

    def _display(self) -> str:
        return self._identifier or f"delta.`{self._location}`"

    def _checked_schema(self) -> T.StructType:
        """The columns as a schema, after refusing what lakefeed cannot honour."""
        return check_new(
            self._spark or SparkSession.active(),
            self._display(),
            self._columns,
            self._partitioned_by,
            self._properties,
        )


def _names(cols: tuple[Any, ...], message: str) -> list[str]:
    """delta-spark's ``*cols`` or one list/tuple of names, each a str."""
    if len(cols) == 1 and isinstance(cols[0], list | tuple):
        cols = tuple(cols[0])
    for col in cols:
        if type(col) is not str:
            _type_error(message, [col])
    return list(cols)


def _generation(
    column: DeltaColumnBuilder,
    always: str | IdentityGenerator | None,
    by_default: IdentityGenerator | None,
) -> None:
    """delta-spark's checks of ``generatedAlwaysAs`` / ``generatedByDefaultAs``."""
    if always is not None and by_default is not None:
        raise ValueError(
            "generatedByDefaultAs and generatedAlwaysAs cannot both be set.", [by_default, always]
        )
    if always is not None:
        if type(always) is str:
            column.generatedAlwaysAs(always)
        elif isinstance(always, IdentityGenerator):
            _check_identity(always)
            column.generatedAlwaysAsIdentity(always.start, always.step)
        else:
            _type_error(
                "Generated always as expression must be str or IdentityGenerator.", [always]
            )
    elif by_default is not None:
        if not isinstance(by_default, IdentityGenerator):
            _type_error("Generated by default expression must be IdentityGenerator.", [by_default])
        _check_identity(by_default)
        column.generatedByDefaultAsIdentity(by_default.start, by_default.step)


def _check_identity(generator: IdentityGenerator) -> None:
    if generator.step == 0:
        raise ValueError("Column identity generation requires step to be non-zero.")
