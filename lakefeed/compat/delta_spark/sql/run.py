"""Running Delta SQL statements: the Spark adapter of :mod:`lakefeed.compat.delta_spark.sql.parse`.

Reads become temporary views of lakefeed's Delta batch read (time travel and change data feed
included) put in place of each reference, and Spark's own ``sql`` runs the rewritten text.
Writes, DML and Delta's utility statements go to what lakefeed already has: the table builder,
``format("delta")`` writes, ``DeltaTable``'s update/delete/merge/history/detail/vacuum/optimize/
restore/generate/convertToDelta and the protocol functions. A statement whose target is not a
Delta table (a name Spark's catalog knows, or no Delta folder) is Spark's, reads rewritten.
Plain names resolve as ``DeltaTable.forName``
(:func:`lakefeed.compat.delta_spark.tables._table_path`), outside pipeline flows only: inside one,
names stay the pipeline's.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import weakref
from collections.abc import Callable
from typing import Any, NoReturn

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakefeed.compat.delta_spark.builder import IdentityGenerator
from lakefeed.compat.delta_spark.errors import ARITY, UNREADABLE, UNSUPPORTED_SQL
from lakefeed.compat.delta_spark.protocol import check_properties
from lakefeed.compat.delta_spark.sql.parse import (
    AddConstraint,
    Convert,
    CreateTable,
    Delete,
    DeltaSqlError,
    DescribeDetail,
    DescribeHistory,
    DescribeTable,
    DropColumns,
    DropConstraint,
    Generate,
    Insert,
    Merge,
    MergeClause,
    Optimize,
    Other,
    Query,
    RenameColumn,
    Restore,
    SetProperties,
    Statement,
    TableRef,
    Update,
    Vacuum,
    parse,
    split_time_travel,
)
from lakefeed.compat.delta_spark.tables import (
    DeltaTable,
    _local,
    _table_path,
    forget_location,
    register_location,
)
from lakefeed.core.flow_context import current_flow
from lakefeed.delta import alter, generated, log, properties
from lakefeed.delta import table as housekeeping
from lakefeed.sql import spark as spark_parser
from lakefeed.sql.ddl import Column
from lakefeed.sql.references import SqlTextError
from lakefeed.sql.tokens import tokens

VIEW_PREFIX = "__lakefeed_delta_"

Original = Callable[..., DataFrame]


def sql(
    spark: SparkSession, original: Original, text: Any, args: Any, kwargs: dict[str, Any]
) -> DataFrame:
    """``spark.sql(text, args, **kwargs)``, Delta tables served by lakefeed (see module doc)."""
    try:
        statement = parse(text) if isinstance(text, str) else None
    except (DeltaSqlError, SqlTextError):
        if _NAMES_DELTA.search(text) is None:
            return original(spark, text, args, **kwargs)  # not Delta's: Spark's grammar decides
        raise
    if statement is None:
        return original(spark, text, args, **kwargs)
    runner = _Runner(spark, original, text, args, kwargs)
    try:
        if isinstance(statement, Query) and not statement.readable:
            runner.check_with_spark(None)
            return original(spark, text, args, **kwargs)
        return runner.run(statement)
    finally:
        runner.drop_views()


class _Runner:
    def __init__(
        self, spark: SparkSession, original: Original, text: str, args: Any, kwargs: dict
    ) -> None:
        self.spark = spark
        self.original = original
        self.text = text
        self.args = args
        self.kwargs = kwargs
        self.reads: list[TableRef] = []
        self.views: set[str] = set()

    # -- reads ---------------------------------------------------------------------------------

    def query(self, span: tuple[int, int] | None = None, prefix: str = "") -> DataFrame:
        """Spark runs ``text`` (or the span of it), each Delta read replaced by a view."""
        start, end = span or (0, len(self.text))
        pieces, at = [], start
        for ref in self.reads:
            if start <= ref.start and ref.end <= end:
                view = self.view(ref)
                if view is not None:
                    pieces += [self.text[at : ref.start], view]
                    at = ref.end
        pieces.append(self.text[at:end])
        return self.original(self.spark, prefix + "".join(pieces), self.args, **self.kwargs)

    def view(self, ref: TableRef) -> str | None:
        """A temporary view of the Delta table ``ref`` reads, or None when it is not one."""
        path = self.delta_path(ref)
        if path is None:
            return None
        reader = self.spark.read.format("delta")
        if ref.version is not None:
            reader = reader.option("versionAsOf", ref.version)
        if ref.timestamp is not None or ref.timestamp_expression is not None:
            reader = reader.option("timestampAsOf", self.timestamp(ref))
        if ref.changes is not None:
            reader = reader.option("readChangeFeed", "true")
            for bound, name in zip(ref.changes, ("starting", "ending"), strict=False):
                quoted = bound[:1] in ("'", '"')
                value = bound[1:-1] if quoted else bound
                reader = reader.option(name + ("Timestamp" if quoted else "Version"), value)
        key = repr((path, ref.version, self.timestamp(ref), ref.changes)).encode()
        name = VIEW_PREFIX + hashlib.sha1(key).hexdigest()[:16]
        reader.load(path).createOrReplaceTempView(name)
        self.views.add(name)
        return name

    def drop_views(self) -> None:
        """Drop the statement's views once Spark has analysed it (a DataFrame keeps its
        resolved plan), except those a view or cache names: a statement making one pins them
        for the session (later statements naming the table refresh them)."""
        pinned = _PINNED.setdefault(self.spark, set())
        if _KEEPS_VIEWS.match(self.text):
            pinned.update(self.views)
            return
        for name in self.views - pinned:
            self.spark.catalog.dropTempView(name)

    def timestamp(self, ref: TableRef) -> str | None:
        """``TIMESTAMP AS OF``'s instant: the literal, or Spark's value of the expression (in
        the session's time zone, as Spark evaluates it) as a UTC ISO text."""
        if ref.timestamp_expression is None:
            return ref.timestamp
        row = self.original(
            self.spark, f"SELECT unix_micros(CAST(({ref.timestamp_expression}) AS TIMESTAMP))"
        ).first()
        micros = row[0] if row is not None else None
        if micros is None:
            raise DeltaSqlError(
                f"TIMESTAMP AS OF {ref.timestamp_expression} gives no timestamp",
                fix="give a timestamp: TIMESTAMP AS OF '2024-01-31 12:00:00'",
            )
        instant = dt.datetime.fromtimestamp(micros / 1e6, dt.UTC)
        return instant.isoformat()

    def delta_path(self, ref: TableRef) -> str | None:
        """The folder of a Delta table ``ref`` names; None for anything Spark serves."""

        if ref.path is not None:
            return _local(ref.path)
        assert ref.name is not None
        if current_flow() is not None:
            return None  # inside a flow, names are the pipeline's (or Spark's)
        try:
            path = _table_path(self.spark, ref.name)
        except ValueError:  # not a name a lakehouse folder can have: Spark's
            return None
        if not log.is_delta_table(path) or self.spark.catalog.tableExists(ref.name):
            return None
        return path

    def check_with_spark(self, known: list[TableRef] | None) -> None:
        """Spark's parser, the authority where a classic session is at hand, must see no Delta
        table beyond those sqlglot placed (``known``; None: sqlglot could not read the
        statement at all). Text Spark rejects is left to the caller (Delta's own statements;
        a syntax error Spark reports itself); without a JVM an unread ``delta.`path``` is
        refused."""
        try:
            names = spark_parser.relations(self.spark, self.text)
        except spark_parser.Rejected:
            return
        if names is None:
            named = ["delta.`...`"] if known is None and _DELTA_PATH.search(self.text) else []
        else:
            placed = {_identity(ref) for ref in known or []}
            named = [
                ".".join(name)
                for name in names
                if _identity(_ref(name)) not in placed and self.delta_path(_ref(name)) is not None
            ]
        if named:
            raise DeltaSqlError(
                f"lakefeed cannot read this statement, which names the Delta table(s) "
                f"{', '.join(named)}: {self.text.strip()[:200]}",
                fix="write the query in plain Spark SQL (SELECT ... FROM t [VERSION AS OF n]), "
                "or read the table with spark.read.format('delta')",
                code=UNREADABLE,
            )

    def table(self, ref: TableRef) -> DeltaTable | None:
        path = self.delta_path(ref)
        return None if path is None else DeltaTable.forPath(self.spark, path)

    # -- statements ----------------------------------------------------------------------------

    def run(self, statement: Statement) -> DataFrame:
        self.reads = statement.reads
        handler = _HANDLERS.get(type(statement))
        target = getattr(statement, "target", None)
        self.check_with_spark([*self.reads, *([target] if target is not None else [])])
        if isinstance(statement, CreateTable):
            return self.create(statement)
        if isinstance(statement, Convert):
            DeltaTable.convertToDelta(
                self.spark, f"parquet.`{statement.path}`", statement.partition_schema
            )
            return _empty(self.spark)
        if handler is None or target is None:
            return self.query()
        table = self.table(target)
        if table is None:
            return self.query()  # Spark's table: its own statement, reads rewritten
        if target.version is not None or target.timestamp is not None:
            _refuse(f"{type(statement).__name__.upper()} on an old version", "drop the AS OF")
        return handler(self, statement, table)

    def create(self, statement: CreateTable) -> DataFrame:
        target = statement.target
        if target.path is None and (statement.using or "") != "delta":
            return self.query()  # another format (or Spark's default): Spark's table
        if statement.clone:
            _refuse(
                "CREATE TABLE ... CLONE",
                "copy the rows: CREATE TABLE t USING DELTA AS SELECT * FROM source "
                "[VERSION AS OF n]",
            )
        location = None if statement.location is None else _local(statement.location)
        if _names_existing(statement) and log.is_delta_table(location or ""):
            pass  # CREATE TABLE name USING DELTA LOCATION '<a Delta table>': the name only
        elif statement.query is not None:
            builder = _builder(self.spark, statement)
            self.create_as_select(statement, builder, *builder._target())
        else:
            _builder(self.spark, statement).execute()
        if target.name is not None and location is not None:
            register_location(self.spark, target.name, location)
        return _empty(self.spark)

    def create_as_select(
        self, statement: CreateTable, builder: Any, path: str, exists: bool
    ) -> None:
        """``CREATE ... AS SELECT``: one write of the rows (table version 0 holds them, as in
        Delta); with TBLPROPERTIES, COMMENT or CLUSTER BY the table is created first."""
        if exists and statement.mode == "createIfNotExists":
            return
        if statement.columns:
            _refuse(
                "CREATE TABLE with both columns and AS SELECT",
                "drop the column list: the query's columns are the table's (cast in the query)",
            )
        assert statement.query is not None
        frame = self.query(statement.query)
        writer = frame.write.format("delta").partitionBy(*statement.partitioned_by)
        if statement.properties or statement.comment or statement.clustered_by:
            builder.addColumns(frame.schema).execute()
            writer.mode("append").save(path)
        else:
            writer.mode("overwrite").option("overwriteSchema", "true").save(path)

    def insert(self, statement: Insert, table: DeltaTable) -> DataFrame:
        if statement.unsupported:
            _refuse(statement.unsupported, "write with INSERT INTO / INSERT OVERWRITE ... SELECT")
        frame = self.query(statement.query)
        schema = table._schema()
        computed = {name for name, _ in generated.expressions(table._open().schema())}
        named = statement.columns or [f.name for f in schema.fields if f.name not in computed]
        if len(named) != len(frame.columns):
            raise DeltaSqlError(
                f"INSERT into {statement.target.describe()}: {len(named)} columns "
                f"({', '.join(named)}) but the query gives {len(frame.columns)}",
                fix="give one value per column, or list the columns: INSERT INTO t (a, b) ...",
                code=ARITY,
            )
        given = {name.lower(): column for name, column in zip(named, frame.columns, strict=True)}
        columns = []
        for field in schema.fields:
            if field.name.lower() in given:
                source = F.col(f"`{given[field.name.lower()]}`")
            elif field.name in computed:
                continue
            else:
                source = F.lit(None)
            columns.append(source.cast(field.dataType).alias(field.name))
        before = housekeeping.version(table._path)
        mode = "overwrite" if statement.overwrite else "append"
        frame.select(*columns).write.format("delta").mode(mode).save(table._path)
        rows = housekeeping.rows_added(table._path, before)
        return self.spark.createDataFrame(
            [(rows, rows)], "num_affected_rows long, num_inserted_rows long"
        )

    def update(self, statement: Update, table: DeltaTable) -> DataFrame:
        names = _qualifiers(statement.target, statement.alias)
        values = {
            _unqualified(k, names): _unqualified(v, names) for k, v in statement.assignments.items()
        }
        condition = _unqualified(statement.condition, names) if statement.condition else None
        metrics = table._update(condition, values)
        return _count(self.spark, int(metrics.get("num_updated_rows", 0)))

    def delete(self, statement: Delete, table: DeltaTable) -> DataFrame:
        names = _qualifiers(statement.target, statement.alias)
        condition = _unqualified(statement.condition, names) if statement.condition else None
        metrics = table._delete(condition)
        return _count(self.spark, int(metrics.get("num_deleted_rows", 0)))

    def merge(self, statement: Merge, table: DeltaTable) -> DataFrame:
        target_alias = statement.alias or statement.target.last_name
        source = self.query(statement.source, prefix="SELECT * FROM ")
        source_text = self.text[statement.source[0] : statement.source[1]].strip()
        source_alias = statement.source_alias or _simple_name(source_text)
        if target_alias:
            table = table.alias(target_alias)
        builder = table.merge(
            source.alias(source_alias) if source_alias else source,
            _normalized(statement.condition),
        )
        for clause in statement.clauses:
            builder = _when(builder, clause, {target_alias} if target_alias else set())
        return builder.execute()

    def history(self, statement: DescribeHistory, table: DeltaTable) -> DataFrame:
        return table.history(statement.limit)

    def detail(self, statement: DescribeDetail, table: DeltaTable) -> DataFrame:
        return table.detail()

    def describe(self, statement: DescribeTable, table: DeltaTable) -> DataFrame:
        """Spark's ``DESCRIBE TABLE`` rows: each column, then the partition columns."""
        opened = table._open()
        comments = {f.name: f.metadata.get("comment") for f in opened.schema().fields}
        rows = {
            f.name: (f.name, f.dataType.simpleString(), comments.get(f.name))
            for f in table._schema().fields
        }
        described = list(rows.values())
        partitions = opened.metadata().partition_columns
        if partitions:
            described += [
                ("# Partition Information", "", ""),
                ("# col_name", "data_type", "comment"),
            ]
            described += [rows[name] for name in partitions]
        return self.spark.createDataFrame(
            described, "col_name string, data_type string, comment string"
        )

    def vacuum(self, statement: Vacuum, table: DeltaTable) -> DataFrame:
        if statement.inventory:
            _refuse("VACUUM ... USING INVENTORY", "run VACUUM <table> [RETAIN n HOURS]")
        if not statement.dry_run:
            return table.vacuum(statement.hours)
        files = table._vacuum(statement.hours, dry_run=True)
        return self.spark.createDataFrame([(f,) for f in sorted(set(files))], "path string")

    def optimize(self, statement: Optimize, table: DeltaTable) -> DataFrame:
        builder = table.optimize()
        if statement.where is not None:
            builder = builder.where(statement.where)
        if statement.zorder:
            return builder.executeZOrderBy(statement.zorder)
        return builder.executeCompaction()

    def restore(self, statement: Restore, table: DeltaTable) -> DataFrame:
        if statement.version is not None:
            return table.restoreToVersion(statement.version)
        assert statement.timestamp is not None
        return table.restoreToTimestamp(statement.timestamp)

    def generate(self, statement: Generate, table: DeltaTable) -> DataFrame:
        table.generate(statement.mode)
        return _empty(self.spark)

    def set_properties(self, statement: SetProperties, table: DeltaTable) -> DataFrame:
        """Protocol versions through ``upgradeTableProtocol``, ``delta.feature.<name>`` through
        ``addFeatureSupport``, other properties checked as at creation, then set."""

        wanted = dict(statement.properties)
        versions = {k.lower(): wanted.pop(k) for k in list(wanted) if k.lower() in _PROTOCOL}
        features = [k for k in wanted if k.lower().startswith(properties.FEATURE_PREFIX)]
        display = statement.target.describe()
        properties.check(display, wanted)
        check_properties(display, {k: v for k, v in wanted.items() if k not in features})
        if versions:
            current = table._open().protocol()
            table.upgradeTableProtocol(
                int(versions.get("delta.minreaderversion", current.min_reader_version)),
                int(versions.get("delta.minwriterversion", current.min_writer_version)),
            )
        for key in features:
            table.addFeatureSupport(key[len(properties.FEATURE_PREFIX) :])
        rest = {k: v for k, v in wanted.items() if k not in features}
        if rest:
            housekeeping.describe(table._path, None, rest)
        return _empty(self.spark)

    def add_constraint(self, statement: AddConstraint, table: DeltaTable) -> DataFrame:
        table._add_constraint(statement.name, statement.expression)
        return _empty(self.spark)

    def drop_constraint(self, statement: DropConstraint, table: DeltaTable) -> DataFrame:
        table._drop_constraint(statement.name, statement.if_exists)
        return _empty(self.spark)

    def rename_column(self, statement: RenameColumn, table: DeltaTable) -> DataFrame:
        alter.rename_column(table._path, statement.column, statement.new_name)
        return _empty(self.spark)

    def drop_columns(self, statement: DropColumns, table: DeltaTable) -> DataFrame:
        alter.drop_columns(table._path, statement.columns, statement.if_exists)
        return _empty(self.spark)

    def other(self, statement: Other, table: DeltaTable) -> DataFrame:
        """``DROP TABLE`` of a name ``CREATE TABLE ... LOCATION`` gave: the name goes, the
        files stay (Delta's external table); anything else is refused."""
        name = statement.target.name
        if statement.what == "DROP TABLE" and name and forget_location(self.spark, name):
            return _empty(self.spark)
        _refuse(
            f"{statement.what} on a Delta table",
            "lakefeed runs SELECT, CREATE/REPLACE TABLE, INSERT, UPDATE, DELETE, MERGE, DESCRIBE "
            "HISTORY/DETAIL/TABLE, VACUUM, OPTIMIZE, RESTORE, GENERATE, CONVERT TO DELTA and ALTER "
            "TABLE SET TBLPROPERTIES / ADD CONSTRAINT / DROP CONSTRAINT / RENAME COLUMN / DROP "
            "COLUMN on Delta tables; for the "
            "rest use lakefeed.compat.delta_spark.DeltaTable "
            "(e.g. DeltaTable.forPath(spark, path).toDF().schema); DROP TABLE forgets a name "
            "given a LOCATION, a table's folder is deleted with the file system's tools",
        )


_NAMES_DELTA = re.compile(r"\bdelta\b", re.IGNORECASE)
_DELTA_PATH = re.compile(r"\bdelta\s*\.\s*`", re.IGNORECASE)
_PINNED: weakref.WeakKeyDictionary[SparkSession, set[str]] = weakref.WeakKeyDictionary()
_KEEPS_VIEWS = re.compile(
    r"\s*(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:GLOBAL\s+)?TEMP(?:ORARY)?\s+)?VIEW|ALTER\s+VIEW"
    r"|CACHE)\b",
    re.IGNORECASE,
)
_PROTOCOL = ("delta.minreaderversion", "delta.minwriterversion")

_HANDLERS: dict[type, Callable[..., DataFrame]] = {
    Insert: _Runner.insert,
    Update: _Runner.update,
    Delete: _Runner.delete,
    Merge: _Runner.merge,
    DescribeHistory: _Runner.history,
    DescribeDetail: _Runner.detail,
    DescribeTable: _Runner.describe,
    Vacuum: _Runner.vacuum,
    Optimize: _Runner.optimize,
    Restore: _Runner.restore,
    Generate: _Runner.generate,
    SetProperties: _Runner.set_properties,
    AddConstraint: _Runner.add_constraint,
    DropConstraint: _Runner.drop_constraint,
    RenameColumn: _Runner.rename_column,
    DropColumns: _Runner.drop_columns,
    Other: _Runner.other,
}


def _ref(name: tuple[str, ...]) -> TableRef:
    """A reference to the table Spark's parser named (``("delta", "/p@v1")`` is a path)."""
    if len(name) == 2 and name[0].lower() == "delta":
        return TableRef(0, 0, path=split_time_travel(name[1])[0])
    return TableRef(0, 0, name=".".join(f"`{part}`" for part in name))


def _identity(ref: TableRef) -> tuple[str, ...]:
    """What makes two references name the same table: the path, or the name's parts."""
    if ref.path is not None:
        return ("delta", ref.path)
    return tuple(part.strip("`").lower() for part in _name_parts(ref.name or ""))


def _name_parts(name: str) -> list[str]:
    """``a.`b.c`.d`` → ``a``, ```b.c```, ``d`` (dots inside backquotes kept)."""
    return [t.text for t in tokens(name) if t.kind in ("word", "quoted")]


def _names_existing(statement: CreateTable) -> bool:
    """``CREATE TABLE name USING DELTA LOCATION '...'`` with nothing else: Delta names the
    table already there (its schema and properties come from its log)."""
    return (
        statement.target.name is not None
        and statement.mode in ("create", "createIfNotExists")
        and not statement.columns
        and statement.query is None
        and not statement.partitioned_by
        and not statement.properties
    )


def _builder(spark: SparkSession, statement: CreateTable) -> Any:
    """The table builder for ``CREATE [OR REPLACE] TABLE``'s name, location and clauses."""

    builder = getattr(DeltaTable, statement.mode)(spark)
    target = statement.target
    builder.tableName(target.name if target.name is not None else f"delta.`{target.path}`")
    if statement.location is not None:
        builder.location(statement.location)
    if statement.comment is not None:
        builder.comment(statement.comment)
    for key, value in statement.properties.items():
        builder.property(key, value)
    if statement.partitioned_by:
        builder.partitionedBy(statement.partitioned_by)
    if statement.clustered_by is not None:
        builder.clusterBy(statement.clustered_by)
    for column in statement.columns:
        builder.addColumn(
            column.name,
            column.type,
            column.nullable,
            generatedAlwaysAs=_always(column),
            generatedByDefaultAs=_by_default(column),
            comment=column.comment,
        )
    return builder


def _always(column: Column) -> str | IdentityGenerator | None:
    """A column's ``GENERATED ALWAYS AS (expr)`` or ``... AS IDENTITY``, for the builder."""
    if column.identity is None or not column.identity.always:
        return column.generated
    return IdentityGenerator(column.identity.start, column.identity.step)


def _by_default(column: Column) -> IdentityGenerator | None:
    """A column's ``GENERATED BY DEFAULT AS IDENTITY``, for the builder."""
    if column.identity is None or column.identity.always:
        return None
    return IdentityGenerator(column.identity.start, column.identity.step)


def _when(builder: Any, clause: MergeClause, target: set[str]) -> Any:
    """One ``WHEN ... THEN ...`` clause on delta-spark's merge builder."""
    condition = _normalized(clause.condition) if clause.condition else None
    values = {_unqualified(k, target): _normalized(v) for k, v in clause.assignments.items()}
    when = {"matched": "whenMatched", "notMatched": "whenNotMatched"}.get(
        clause.when, "whenNotMatchedBySource"
    )
    if clause.action == "delete":
        return getattr(builder, when + "Delete")(condition)
    if clause.action in ("updateAll", "insertAll"):
        if clause.when == "notMatchedBySource":
            _refuse("WHEN NOT MATCHED BY SOURCE THEN UPDATE SET *", "list the columns to set")
        return getattr(
            builder, when + ("UpdateAll" if clause.action == "updateAll" else "InsertAll")
        )(condition)
    if clause.action == "update":
        return getattr(builder, when + "Update")(condition, values)
    return getattr(builder, when + "Insert")(condition, values)


def _qualifiers(target: TableRef, alias: str | None) -> set[str]:
    return {n.lower() for n in (alias, target.last_name) if n}


def _normalized(expression: str) -> str:
    """Spark SQL operators the Delta engine (DataFusion) spells otherwise."""
    return _unqualified(expression, set())


_SPELLING = {"==": "=", "<=>": "IS NOT DISTINCT FROM"}


def _unqualified(expression: str, names: set[str]) -> str:
    """``expression`` without the target's alias or name before its columns (``t.id`` →
    ``id``: UPDATE and DELETE see one table), operators spelled for the Delta engine."""
    pieces, at = [], 0
    toks = tokens(expression)
    for index, token in enumerate(toks):
        following = toks[index + 1] if index + 1 < len(toks) else None
        before = toks[index - 1] if index else None
        qualifier = (
            token.kind in ("word", "quoted")
            and token.value.lower() in names
            and following is not None
            and following.text == "."
            and (before is None or before.text != ".")
        )
        if qualifier:
            assert following is not None
            pieces.append(expression[at : token.start])
            at = following.end
        elif token.text in _SPELLING:
            pieces += [expression[at : token.start], f" {_SPELLING[token.text]} "]
            at = token.end
    pieces.append(expression[at:])
    return "".join(pieces).strip()


_SIMPLE = re.compile(r"^[A-Za-z_`][\w`]*(\.[A-Za-z_`][\w`]*)*$")


def _simple_name(text: str) -> str | None:
    """The last part of a plain (view or table) name: the alias a MERGE source goes by."""
    return text.split(".")[-1].strip("`") if _SIMPLE.match(text) else None


def _count(spark: SparkSession, rows: int) -> DataFrame:
    return spark.createDataFrame([(rows,)], "num_affected_rows long")


def _empty(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], T.StructType([]))


def _refuse(what: str, fix: str) -> NoReturn:
    raise DeltaSqlError(
        f"{what} is not supported by lakefeed's Delta SQL", fix=fix, code=UNSUPPORTED_SQL
    )
