"""Creating a Delta table: the one routine every creator uses — delta-spark's table builder and
SQL ``CREATE TABLE``, a pipeline's tables (declared or from a query's schema), an AUTO CDC
flow's state table.

A table is created from a Spark or an Arrow schema with its partition columns, description,
properties and CHECK constraints, always with the storage options of its location (object
storage credentials, endpoints), lakefeed's commitInfo and lakefeed's post-commit hooks; each
constraint is then added as ``ALTER TABLE ADD CONSTRAINT`` adds it (Delta takes none through
TBLPROPERTIES). :func:`check_new` refuses, before anything is written, the columns and properties
lakefeed's writers could not honour, as delta-spark's checks name them (duplicate columns, bad
partition columns, identity columns, clustering columns (:mod:`.clustering`), generated
columns that are not deterministic expressions over the other columns — analysed by Spark).
A table clustered by ``cluster_by`` gets its clustering in a last commit.

    from lakefeed.delta import create
    schema = create.check_new(spark, "events", fields, ["day"], {})
    create.create(root, schema, partition_by=["day"], constraints={"positive": "id > 0"})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from lakefeed.core import storage
from lakefeed.delta import (
    clustering,
    identity,
    log,
    operations,
    post_commit,
    properties,
    tblprops,
)
from lakefeed.delta.errors import (
    ALL_COLUMNS_PARTITION,
    DUPLICATE_COLUMNS,
    GENERATED_AGGREGATE,
    GENERATED_EXPRESSION,
    GENERATED_NON_DETERMINISTIC,
    GENERATED_REFERENCE,
    GENERATED_TYPE_MISMATCH,
    GENERATED_UDF,
    IDENTITY_STEP_ZERO,
    IDENTITY_TYPE,
    NO_SCHEMA,
    DeltaOperationError,
    SchemaMismatchError,
)
from lakefeed.delta.errors import PARTITION_NOT_FOUND as BAD_COLUMN
from lakefeed.delta.generated import GENERATION_EXPRESSION
from lakefeed.delta.upgrade import check_properties

IDENTITY_FEATURE = "identityColumns"


def create(
    root: str,
    schema: T.StructType | pa.Schema,
    *,
    partition_by: Sequence[str] = (),
    description: str | None = None,
    configuration: Mapping[str, str] | None = None,
    constraints: Mapping[str, str] | None = None,
    replace: bool = False,
    cluster_by: Sequence[str] = (),
) -> None:
    """Create the table at ``root`` (or, with ``replace``, replace the one there: one commit
    with the new metadata that removes every file, history kept); see the module doc. A Spark
    schema keeps its field metadata (comments, generation expressions) and nullability."""
    if cluster_by:
        spark_schema = from_arrow_schema(schema) if isinstance(schema, pa.Schema) else schema
        clustering.check_new(root, spark_schema.fields, partition_by, cluster_by)
    rs_schema = (
        DeltaSchema.from_arrow(schema)
        if isinstance(schema, pa.Schema)
        else DeltaSchema.from_json(schema.json())
    )
    settings = dict(configuration or {})
    later = tblprops.after_create(settings)  # set by a commit of lakefeed's (tblprops)
    before = log.rs_table(root).version() if replace else -1
    operations.run(
        "CREATE OR REPLACE TABLE" if replace else "CREATE TABLE",
        root,
        lambda: DeltaTable.create(
            root,
            rs_schema,
            mode="overwrite" if replace else "error",
            partition_by=list(partition_by) or None,
            description=description,
            configuration=settings or None,
            storage_options=storage.delta_options(root),
            raise_if_key_not_exists=False,  # Delta takes any key outside ``delta.``
            **operations.commit_args(None),
        ),
    )
    if later:
        tblprops.set_properties(root, log.rs_table(root), later)
    if identity.of_schema(rs_schema):
        tblprops.add_features(root, log.rs_table(root), {IDENTITY_FEATURE}, "UPGRADE PROTOCOL")
    post_commit.run(root, settings, before + 1, before, lambda: log.rs_table(root))
    for name, expression in (constraints or {}).items():
        operations.add_constraint(root, name, expression)
    if cluster_by:  # the last commit: delta-rs, which commits the others, refuses one after
        clustering.cluster(root, cluster_by)


def nullable(struct: T.StructType) -> pa.Schema:
    """A DataFrame's schema as the Arrow schema of a table its rows go to: every column
    nullable, as Delta tables written by Spark are."""
    return pa.schema([f.with_nullable(True) for f in to_arrow_schema(struct, timezone="UTC")])


def check_new(
    spark: SparkSession,
    display: str,
    columns: list[T.StructField],
    partition_by: Sequence[str],
    configuration: Mapping[str, str],
) -> T.StructType:
    """The columns of new table ``display`` as a schema, after refusing what lakefeed cannot
    honour (see the module doc)."""
    if not columns:
        raise DeltaOperationError(
            f"table {display}: no columns given",
            fix="add columns with .addColumn(name, type) or .addColumns(df.schema)",
            code=NO_SCHEMA,
        )
    names = [field.name.lower() for field in columns]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise DeltaOperationError(
            f"found duplicate column(s) in {display}: {', '.join(twice)}",
            fix="give each column once (names compare without case)",
            code=DUPLICATE_COLUMNS,
        )
    for column in partition_by:
        if column.lower() not in names:
            raise SchemaMismatchError(
                f"partition column {column!r} not found in schema {names}",
                fix="partition by columns of the table",
                code=BAD_COLUMN,
            )
    if len(set(c.lower() for c in partition_by)) == len(names):
        raise DeltaOperationError(
            "cannot use all columns for partition columns",
            fix="keep at least one column out of partitionedBy",
            code=ALL_COLUMNS_PARTITION,
        )
    _check_identity(columns)
    _check_generated(spark, columns)
    properties.check(display, configuration)
    check_properties(display, configuration)
    return T.StructType(columns)


def _check_identity(columns: list[T.StructField]) -> None:
    """Delta's checks of an identity column: a BIGINT with a step other than 0, not also a
    generated column."""
    for field in columns:
        if identity.START not in field.metadata:
            continue
        if not isinstance(field.dataType, T.LongType):
            raise DeltaOperationError(
                f"DataType {field.dataType.simpleString()} is not supported for IDENTITY "
                f"column {field.name}",
                fix="declare the identity column BIGINT (LONG)",
                code=IDENTITY_TYPE,
            )
        if int(field.metadata.get(identity.STEP, 1)) == 0:
            raise DeltaOperationError(
                f"IDENTITY column {field.name} step cannot be 0",
                fix="give INCREMENT BY a value other than 0",
                code=IDENTITY_STEP_ZERO,
            )


def _check_generated(spark: SparkSession, columns: list[T.StructField]) -> None:
    """Delta's checks of a generated column (``GeneratedColumn.validateGeneratedColumns``): its
    expression is Spark SQL over the table's other (not generated) columns, allowed in a
    generated column (:func:`_refused_part`), and gives the column's type. Spark analyses it
    over an empty frame: no job runs."""
    generated = [field for field in columns if GENERATION_EXPRESSION in field.metadata]
    if not generated:
        return
    names = {field.name for field in generated}
    plain = spark.createDataFrame([], T.StructType([f for f in columns if f.name not in names]))
    for field in generated:
        expression = field.metadata[GENERATION_EXPRESSION]
        projected = _analysed(plain, field.name, expression)
        refused = _refused_part(projected)
        if refused is not None:
            code, message = refused
            raise DeltaOperationError(
                f"generated column {field.name!r} = {expression!r}: {message}",
                fix="derive the column from the row's own values with built-in, deterministic "
                "functions (e.g. CAST(eventTime AS DATE)); compute anything else before writing",
                code=code,
            )
        found = projected.schema.fields[0].dataType
        if found != field.dataType:
            raise DeltaOperationError(
                f"generated column {field.name!r} is {field.dataType.simpleString()} but its "
                f"expression {expression!r} gives {found.simpleString()}",
                fix=f"cast it: CAST({expression} AS {field.dataType.simpleString().upper()})",
                code=GENERATED_TYPE_MISMATCH,
            )


def _analysed(plain: DataFrame, name: str, expression: str) -> Any:
    """``plain`` projected on the expression (analysed): an unknown column or another generated
    column is Delta's ``DELTA_INVALID_GENERATED_COLUMN_REFERENCES``, bad SQL is refused too."""
    try:
        projected = plain.select(F.expr(expression))
        projected.schema  # noqa: B018 - analyses the plan (Spark Connect: on the server)
    except PySparkException as exc:
        unresolved = (exc.getCondition() or "").startswith("UNRESOLVED_COLUMN")
        raise DeltaOperationError(
            f"generated column {name!r}: {expression!r} is not an expression over the table's "
            f"other columns ({exc.getMessage() or exc})"
            + (
                ": a generated column cannot use a non-existent column or another generated column"
                if unresolved
                else ""
            ),
            fix="use Spark SQL over columns that are not generated themselves, e.g. "
            "CAST(eventTime AS DATE)",
            code=GENERATED_REFERENCE if unresolved else GENERATED_EXPRESSION,
        ) from None
    return projected


_UNSUPPORTED = (
    "org.apache.spark.sql.catalyst.expressions.Generator",
    "org.apache.spark.sql.catalyst.expressions.WindowExpression",
    "org.apache.spark.sql.catalyst.expressions.CurrentTimestampLike",
    "org.apache.spark.sql.catalyst.expressions.CurrentDate",
    "org.apache.spark.sql.catalyst.expressions.CurrentTimeZone",
    "org.apache.spark.sql.catalyst.expressions.CurrentUser",
    "org.apache.spark.sql.catalyst.expressions.CurrentDatabase",
    "org.apache.spark.sql.catalyst.expressions.CurrentCatalog",
    "org.apache.spark.sql.catalyst.expressions.SubqueryExpression",
)
"""Deterministic within one query but not across queries, or not one value per row: Delta's
list of allowed expressions leaves them out (``current_timestamp() cannot be used in a
generated column``)."""


def _refused_part(projected: Any) -> tuple[str, str] | None:
    """The first part of the analysed expression Delta refuses in a generated column (top down,
    in Delta's order: a UDF, anything non-deterministic, an aggregate, :data:`_UNSUPPORTED`), as
    (code, Delta's message); None when all is allowed. Spark Connect has no plan here: its
    expressions are taken as allowed (the write still checks each given value)."""
    jdf = getattr(projected, "_jdf", None)
    if jdf is None:
        return None
    jvm = projected.sparkSession._jvm
    kinds = _classes(jvm)
    pending = list(_plan_expressions(jdf.queryExecution().analyzed()))
    while pending:
        node = pending.pop(0)
        # An alias is as deterministic as what it names: judge that instead (as Delta does).
        refused = None if node.getClass().getSimpleName() == "Alias" else _refusal(node, kinds)
        if refused is not None:
            return refused
        children = node.children()
        pending[:0] = [children.apply(i) for i in range(children.size())]
    return None


def _refusal(node: Any, kinds: dict[str, Any]) -> tuple[str, str] | None:
    if kinds["udf"].isInstance(node):
        return GENERATED_UDF, (
            f"found {node.sql()}. A generated column cannot use a user-defined function"
        )
    if not node.deterministic():
        return GENERATED_NON_DETERMINISTIC, (
            f"found {node.sql()}. A generated column cannot use a non deterministic expression"
        )
    if kinds["aggregate"].isInstance(node):
        return (
            GENERATED_AGGREGATE,
            f"found {node.sql()}. A generated column cannot use an aggregate expression",
        )
    if any(kind.isInstance(node) for kind in kinds["unsupported"]):
        return GENERATED_EXPRESSION, f"{node.sql()} cannot be used in a generated column"
    return None


def _plan_expressions(plan: Any) -> list[Any]:
    """The expressions of every node of an analysed plan (the relation's none)."""
    found = []
    nodes = [plan]
    while nodes:
        node = nodes.pop(0)
        expressions = node.expressions()
        found += [expressions.apply(i) for i in range(expressions.size())]
        children = node.children()
        nodes += [children.apply(i) for i in range(children.size())]
    return found


def _classes(jvm: Any) -> dict[str, Any]:
    """The JVM classes :func:`_refused_part` tests against (those this Spark has)."""
    load = jvm.java.lang.Class.forName
    unsupported = []
    for name in _UNSUPPORTED:
        try:
            unsupported.append(load(name))
        except Exception:  # noqa: BLE001 - an expression class this Spark version lacks
            continue
    return {
        "udf": load("org.apache.spark.sql.catalyst.expressions.UserDefinedExpression"),
        "aggregate": load(
            "org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression"
        ),
        "unsupported": unsupported,
    }
