"""``DeltaTable``: delta-spark's Python API (``delta.tables.DeltaTable``) over lakefeed's Delta
engine (:mod:`lakefeed.delta`).

Code written for Databricks or delta-spark runs unchanged (lakefeed ships the ``delta``
package delta-spark's docs import, see ``delta/__init__.py``)::

    from delta.tables import DeltaTable

    target = DeltaTable.forPath(spark, "/data/customers")
    (target.alias("t")
           .merge(updates.alias("s"), "t.id = s.id")
           .whenMatchedUpdateAll()
           .whenNotMatchedInsertAll()
           .execute())

Reads go through lakefeed's ``format("delta")`` (Spark's Parquet reader); every change (merge,
update, delete, optimize, vacuum, restore) is one call of the engine (:mod:`lakefeed.delta.merger`,
:mod:`lakefeed.delta.operations`) and one Delta commit; this module translates delta-spark's names,
conditions (pyspark Columns) and session confs onto it. Idempotent changes, as Delta documents for
``foreachBatch``: the session confs ``spark.databricks.delta.write.txnAppId`` / ``txnVersion`` (or
the merge builder's ``withTransaction(appId, version)``) put a ``txn`` action into the same commit,
and a change whose version is not above the table's ``transaction_version(appId)`` is skipped — so a
micro-batch replayed after a crash changes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn

import pyarrow as pa
from deltalake import DeltaTable as RsTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from lakefeed.compat.delta_spark import protocol
from lakefeed.compat.delta_spark.errors import DEEP_CLONE, PRIVATE_TABLE, UNKNOWN_GENERATE_MODE
from lakefeed.compat.delta_spark.exprs import Condition, Scope
from lakefeed.connectors.delta.adapters import read as delta_read
from lakefeed.core import config, storage
from lakefeed.core.flow_context import current_flow
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import clustering, log, manifest, operations
from lakefeed.delta import table as housekeeping
from lakefeed.delta.errors import (
    DeltaOperationError,
    DeltaTableNotFoundError,
    unsupported,
)
from lakefeed.delta.operations import Txn
from lakefeed.delta.options import table_root, time_travel_version
from lakefeed.delta.spark_read import spark_schema
from lakefeed.pipeline import api

if TYPE_CHECKING:
    from lakefeed.compat.delta_spark.builder import DeltaColumnBuilder, DeltaTableBuilder

TXN_APP_CONF = config.TXN_APP_ID.key
TXN_VERSION_CONF = config.TXN_VERSION.key
TXN_RESET_CONF = config.TXN_AUTO_RESET.key
RETENTION_CHECK_CONF = config.RETENTION_CHECK.key
LAKEHOUSE_CONF = config.LAKEHOUSE.key
"""Session conf naming the lakehouse folder ``forName`` resolves names in (see ``forName``)."""


__all__ = ["DeltaOperationError", "DeltaTable", "DeltaTableNotFoundError", "Txn"]


def _conf_txn(spark: SparkSession) -> Txn | None:
    """Delta's session confs for idempotent writes, both or neither."""
    app = spark.conf.get(TXN_APP_CONF, None)
    version = spark.conf.get(TXN_VERSION_CONF, None)
    if (app is None) != (version is None):
        raise DeltaOperationError(
            f"set both {TXN_APP_CONF} and {TXN_VERSION_CONF} for an idempotent change, or neither"
        )
    return Txn(app, int(version)) if app is not None and version is not None else None


def _flag(spark: SparkSession, name: str, default: bool) -> bool:
    return str(spark.conf.get(name, str(default))).strip().lower() == "true"


def _reset_txn_conf(spark: SparkSession, txn: Txn | None) -> None:
    """Delta's ``txnVersion.autoReset.enabled``: unset the version after the change."""
    if txn is not None and _flag(spark, TXN_RESET_CONF, False):
        spark.conf.unset(TXN_VERSION_CONF)


Change = Callable[[Txn | None], dict[str, Any] | None]
"""An engine change (:mod:`lakefeed.delta.operations`) under a transaction, or None."""

_LOCATIONS: weakref.WeakKeyDictionary[SparkSession, dict[str, str]] = weakref.WeakKeyDictionary()
"""Per session (as Spark's in-memory catalog): table name -> the folder ``CREATE TABLE name ...
LOCATION '...'`` gave it."""


def _catalog_key(name: str) -> str:
    """A table name as one key: ``events``, ``default.events`` and ``spark_catalog.default.events``
    are the same table (names compare without case, as Spark's catalog)."""
    parts = name.replace("`", "").lower().split(".")
    return ".".join((["default"] + parts)[-2:])


def register_location(spark: SparkSession, name: str, path: str) -> None:
    """Make ``name`` resolve to the table at ``path`` in this session (``forName``, ``spark.table``,
    SQL), as an external table in Spark's catalog would."""
    _LOCATIONS.setdefault(spark, {})[_catalog_key(name)] = path


def forget_location(spark: SparkSession, name: str) -> bool:
    """Drop a name :func:`register_location` gave; whether it had one."""
    return _LOCATIONS.get(spark, {}).pop(_catalog_key(name), None) is not None


def _table_path(spark: SparkSession, name: str) -> str:
    """Where ``forName`` looks: see :meth:`DeltaTable.forName`."""

    parts = name.replace("`", "").split(".")
    flow = current_flow()
    local = api.local_name(name) if flow is not None else None
    if flow is not None and local is not None:  # the pipeline's database: its lakehouse
        return str(flow.lakehouse.table_path(local))
    registered = _LOCATIONS.get(spark, {}).get(_catalog_key(name))
    if registered is not None:
        return registered
    lakehouse = spark.conf.get(LAKEHOUSE_CONF, None)
    if lakehouse:
        home = Lakehouse.at(str(lakehouse))
        if parts[-1] in home.private_tables():
            raise DeltaTableNotFoundError(
                f"table {name!r} is private to the pipeline of lakehouse {lakehouse} (DLT's "
                "private=True / temporary=True): only that pipeline's flows read it",
                fix="read it in a flow of that pipeline, or publish it: drop private=True "
                "(temporary=True) and run the pipeline again",
                code=PRIVATE_TABLE,
            )
        return str(home.table_path(parts[-1]))
    warehouse = str(spark.conf.get("spark.sql.warehouse.dir", "spark-warehouse"))
    if warehouse.startswith("file:"):
        warehouse = warehouse.removeprefix("file:")
    if len(parts) == 1 or parts[-2] == "default":
        return os.path.join(warehouse, parts[-1])
    return os.path.join(warehouse, f"{parts[-2]}.db", parts[-1])


def _local(path: str) -> str:
    return table_root({"path": str(path)})


class DeltaTable:
    """A Delta table for Spark code, as ``delta.tables.DeltaTable`` (see the module doc)."""

    def __init__(
        self,
        spark: SparkSession,
        path: str,
        alias: str | None = None,
        hadoopConf: Mapping[str, str] | None = None,
    ) -> None:
        self._spark = spark
        self._path = path
        self._alias = alias
        self._hadoop = dict(hadoopConf or {})  # secrets: never in repr

    # ------------------------------------------------------------------ finding tables

    @classmethod
    def forPath(
        cls, sparkSession: SparkSession, path: str, hadoopConf: dict[str, str] | None = None
    ) -> DeltaTable:
        """The Delta table at ``path`` (local paths, ``file:`` and ``s3://``/``s3a://`` URIs).

        ``hadoopConf``: Hadoop file system settings for this table, as in delta-spark (only keys
        starting with ``fs.`` or ``dfs.``; S3A's ``fs.s3a.endpoint``, ``fs.s3a.access.key``...
        reach lakefeed's delta-rs and pyarrow clients of the table, and Spark's reads of it).
        """
        conf = dict(hadoopConf or {})
        other = sorted(k for k in conf if k not in storage.hadoop_options(conf))
        if other:
            raise DeltaOperationError(
                f"hadoopConf takes Hadoop file system settings only, not {other}",
                fix="keep the keys that start with 'fs.' or 'dfs.'",
            )
        root = _local(path)
        storage.register(root, conf)
        if not log.is_delta_table(root):
            raise DeltaTableNotFoundError(
                f"{path} is not a Delta table (no _delta_log with commits)",
                fix="check the path, or write the table first",
            )
        return cls(sparkSession, root, hadoopConf=conf)

    @classmethod
    def forName(cls, sparkSession: SparkSession, tableOrViewName: str) -> DeltaTable:
        """A table by name, looked up (there is no metastore) in this order:

        1. inside a running pipeline flow, a name of the pipeline's database (``x``, ``db.x``,
           ``cat.db.x``, see :mod:`lakefeed.pipeline.names`): that pipeline's lakehouse
           (``tables/<name>``); another database's name is looked up as outside a flow;
        2. the location SQL's ``CREATE TABLE name ... LOCATION '...'`` gave the name in this
           session;
        3. with the session conf ``lakefeed.core.lakehouse`` set: ``<lakehouse>/tables/<name>``;
        4. else Spark's managed-table layout under ``spark.sql.warehouse.dir``:
           ``<warehouse>/<name>`` (database ``default``) or ``<warehouse>/<db>.db/<name>``.
        """
        path = _table_path(sparkSession, tableOrViewName)
        if not log.is_delta_table(path):
            raise DeltaTableNotFoundError(
                f"{tableOrViewName!r} is not a Delta table (looked at {path})",
                fix=f"set spark.conf {LAKEHOUSE_CONF} to the lakehouse folder, or use forPath",
            )
        return cls(sparkSession, path)

    @classmethod
    def isDeltaTable(cls, sparkSession: SparkSession, identifier: str) -> bool:
        """True when ``identifier`` (a path) holds a Delta table."""
        return log.is_delta_table(_local(identifier))

    # ------------------------------------------------------------------ creating tables

    @classmethod
    def create(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder for a new table; ``execute()`` fails if it exists (``CREATE TABLE``)."""
        return _builder(sparkSession, "create")

    @classmethod
    def createIfNotExists(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that leaves an existing table as it is (``CREATE TABLE IF NOT EXISTS``)."""
        return _builder(sparkSession, "createIfNotExists")

    @classmethod
    def replace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder replacing an existing table, failing if there is none (``REPLACE TABLE``)."""
        return _builder(sparkSession, "replace")

    @classmethod
    def createOrReplace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder replacing the table or creating it (``CREATE OR REPLACE TABLE``)."""
        return _builder(sparkSession, "createOrReplace")

    @classmethod
    def columnBuilder(cls, sparkSession: SparkSession, colName: str) -> DeltaColumnBuilder:
        """A column for ``addColumns``: ``dataType``, ``nullable``, ``comment``, ``build()``."""
        # deferred: at module load it would close an import cycle
        from lakefeed.compat.delta_spark.builder import DeltaColumnBuilder

        return DeltaColumnBuilder(sparkSession, colName)

    @classmethod
    def convertToDelta(
        cls,
        sparkSession: SparkSession,
        identifier: str,
        partitionSchema: str | T.StructType | None = None,
    ) -> DeltaTable:
        """A Delta log over the Parquet folder ``parquet.`/path``` (partition folders typed by
        ``partitionSchema``: ``"part int"`` or a StructType), in one commit, files left as they
        are. As in Delta, stop writers to the folder first."""

        root = _local(protocol.parquet_folder(identifier))
        protocol.convert(root, partitionSchema)
        return cls.forPath(sparkSession, root)

    # ------------------------------------------------------------------ protocol

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        """Raise the reader/writer versions (never lowered), as delta-spark does."""

        if not isinstance(readerVersion, int):
            raise ValueError(
                f"The readerVersion needs to be an integer but got '{type(readerVersion)}'."
            )
        if not isinstance(writerVersion, int):
            raise ValueError(
                f"The writerVersion needs to be an integer but got '{type(writerVersion)}'."
            )
        protocol.upgrade(self._open(), self._path, readerVersion, writerVersion)

    def addFeatureSupport(self, featureName: str) -> None:
        """Add table feature ``featureName`` (Delta's name, e.g. ``appendOnly``), raising the
        protocol to table features (writer 7, and reader 3 for a reader feature)."""

        _verify_str(featureName, "featureName")
        protocol.add_feature(self._open(), self._path, featureName)

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        """Refused: delta-rs cannot drop a table feature."""
        _verify_str(featureName, "featureName")
        unsupported(
            f"dropFeatureSupport({featureName!r})",
            "delta-rs cannot drop table features",
            "recreate the table without the feature: DeltaTable.createOrReplace(...) and "
            "write the rows back (or use Spark with delta-spark)",
        )

    def generate(self, mode: str) -> None:
        """Write the table's symlink format manifests (``mode`` ``"symlink_format_manifest"``,
        any case), as Delta's full generation; see :mod:`lakefeed.delta.manifest`."""
        if mode.lower() != "symlink_format_manifest":
            raise DeltaOperationError(
                f"generate mode {mode!r} is not supported",
                fix="use generate('symlink_format_manifest')",
                code=UNKNOWN_GENERATE_MODE,
            )
        manifest.write_manifests(self._path)

    def clone(
        self,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        """Refused: a deep clone as in delta-spark (``DELTA_UNSUPPORTED_DEEP_CLONE``), a shallow
        one because its files live outside the table folder, which delta-rs cannot read."""
        return _refuse_clone(isShallow)

    def cloneAtVersion(
        self,
        version: int,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        return _refuse_clone(isShallow)

    def cloneAtTimestamp(
        self,
        timestamp: str,
        target: str,
        isShallow: bool = False,
        replace: bool = False,
        properties: dict[str, str] | None = None,
    ) -> DeltaTable:
        return _refuse_clone(isShallow)

    # ------------------------------------------------------------------ reading

    def toDF(self) -> DataFrame:
        """The table's current rows (aliased when :meth:`alias` was called), read through the
        connector's own function: the runtime merges and checks constraints with it on sessions
        without the pyspark patches."""
        frame = delta_read(self._spark, self._path, **self._hadoop)
        return frame.alias(self._alias) if self._alias else frame

    def alias(self, aliasName: str) -> DeltaTable:
        return DeltaTable(self._spark, self._path, aliasName, self._hadoop)

    def _open(self) -> RsTable:
        return log.open_table(self._path)

    def _schema(self) -> T.StructType:
        return spark_schema(self._open())

    # ------------------------------------------------------------------ changing rows

    def merge(self, source: DataFrame | pa.Table, condition: Condition) -> Any:
        """A :class:`~lakefeed.compat.delta_spark.merge.DeltaMergeBuilder` for ``source`` on
        ``condition`` (a DataFrame, or an Arrow table already on the driver, aliased ``source``)."""
        # deferred: at module load it would close an import cycle
        from lakefeed.compat.delta_spark.merge import DeltaMergeBuilder

        return DeltaMergeBuilder(self, source, condition)

    def update(
        self,
        condition: Condition | None = None,
        set: Mapping[str, Condition] | None = None,  # noqa: A002 - delta-spark's name
    ) -> None:
        """Set columns of the rows matching ``condition`` (all rows without one)."""
        self._update(condition, set)

    def _update(
        self, condition: Condition | None, values: Mapping[str, Condition] | None
    ) -> dict[str, Any]:
        """:meth:`update`, returning delta-rs's metrics (SQL's ``UPDATE`` shows them)."""
        scope = Scope(self._spark, {None: self._schema()})
        updates = scope.values(values, "set")
        predicate = scope.sql(condition, "update condition")
        return self._change(lambda txn: operations.update(self._path, updates, predicate, txn))

    def delete(self, condition: Condition | None = None) -> None:
        """Delete the rows matching ``condition`` (every row without one)."""
        self._delete(condition)

    def _delete(self, condition: Condition | None) -> dict[str, Any]:
        """:meth:`delete`, returning delta-rs's metrics (SQL's ``DELETE`` shows them)."""
        predicate = Scope(self._spark, {None: self._schema()}).sql(condition, "delete condition")
        return self._change(lambda txn: operations.delete(self._path, predicate, txn))

    def _add_constraint(self, name: str, expression: str) -> None:
        """``ALTER TABLE ... ADD CONSTRAINT name CHECK (expression)``, the rows already in the
        table checked by Spark (:func:`lakefeed.delta.operations.add_constraint`)."""

        def violations(predicate: str) -> int:
            return self.toDF().where(f"NOT coalesce(({predicate}), false)").count()

        operations.add_constraint(self._path, name, expression, violations)

    def _drop_constraint(self, name: str, if_exists: bool) -> None:
        """``ALTER TABLE ... DROP CONSTRAINT [IF EXISTS] name``."""
        operations.drop_constraint(self._path, name, if_exists)

    def _change(self, change: Change, txn: Txn | None = None) -> dict[str, Any]:
        """One engine change, exactly once under ``txn`` or else Delta's session confs
        ``txnAppId``/``txnVersion``; its metrics, none when the transaction was committed."""
        txn = txn or _conf_txn(self._spark)
        metrics = change(txn)
        _reset_txn_conf(self._spark, txn)
        return metrics or {}

    # ------------------------------------------------------------------ table utilities

    def history(self, limit: int | None = None) -> DataFrame:
        """Commits, newest first, in delta-spark's ``DESCRIBE HISTORY`` columns."""
        rows = [_history_row(e) for e in housekeeping.history(self._path, limit)]
        return self._spark.createDataFrame(rows, HISTORY_SCHEMA)

    def detail(self) -> DataFrame:
        """One row in delta-spark's ``DESCRIBE DETAIL`` columns."""
        table = self._open()
        info = housekeeping.info(self._path)
        metadata, protocol = table.metadata(), table.protocol()
        history = housekeeping.history(self._path)
        features = sorted(set(protocol.reader_features or []) | set(protocol.writer_features or []))
        row: tuple[Any, ...] = (
            "delta",
            metadata.id,
            metadata.name,
            metadata.description,
            _uri(self._path),
            _utc(metadata.created_time),
            history[0]["timestamp"] if history else None,
            list(metadata.partition_columns),
            clustering.columns_of(self._path, table),
            info.files,
            info.size_bytes,
            _table_properties(metadata.configuration),
            protocol.min_reader_version,
            protocol.min_writer_version,
            features,
        )
        return self._spark.createDataFrame([row], DETAIL_SCHEMA)

    def optimize(self) -> DeltaOptimizeBuilder:
        return DeltaOptimizeBuilder(self)

    def vacuum(self, retentionHours: float | None = None) -> DataFrame:
        """Delete files no version within ``retentionHours`` (default 168) needs.

        As in Delta, a retention below 168 hours is refused unless the session conf
        ``spark.databricks.delta.retentionDurationCheck.enabled`` is ``false``.
        """
        self._vacuum(retentionHours, dry_run=False)
        return self._spark.createDataFrame([(_uri(self._path),)], "path string")

    def _vacuum(self, hours: float | None, dry_run: bool) -> list[str]:
        """:meth:`vacuum`; SQL's ``VACUUM ... DRY RUN`` lists the files instead (as URIs)."""
        retention = housekeeping.DEFAULT_RETENTION_HOURS if hours is None else hours
        check = _flag(self._spark, RETENTION_CHECK_CONF, True)
        try:
            files = housekeeping.vacuum(self._path, retention, dry_run=dry_run, force=not check)
        except ValueError as error:
            raise DeltaOperationError(
                str(error), fix=f"set {RETENTION_CHECK_CONF}=false if nothing reads old versions"
            ) from error
        return [_uri(self._path.rstrip("/") + "/" + name) for name in files]

    def restoreToVersion(self, version: int) -> DataFrame:
        return self._restore(int(version))

    def restoreToTimestamp(self, timestamp: str | dt.datetime) -> DataFrame:
        """Restore the version a ``timestampAsOf`` read would see, as Delta does: a timestamp
        before the first commit is an error (delta-rs alone restored some version)."""
        stamp = timestamp.isoformat() if isinstance(timestamp, dt.datetime) else timestamp
        version = time_travel_version(self._path, {"timestampAsOf": stamp})
        return self._restore(int(version or 0))

    def _restore(self, target: int | dt.datetime) -> DataFrame:
        metrics = self._change(lambda txn: operations.restore(self._path, target, txn))
        after = housekeeping.info(self._path)
        row = (
            after.size_bytes,
            after.files,
            int(metrics.get("numRemovedFile", 0)),
            int(metrics.get("numRestoredFile", 0)),
            None,
            None,
        )
        return self._spark.createDataFrame([row], RESTORE_SCHEMA)

    def __repr__(self) -> str:
        return f"DeltaTable({self._path!r}{', alias=' + repr(self._alias) if self._alias else ''})"


def _builder(spark: SparkSession | None, mode: str) -> DeltaTableBuilder:
    # deferred: at module load it would close an import cycle
    from lakefeed.compat.delta_spark.builder import DeltaTableBuilder

    session = spark or SparkSession.getActiveSession()
    assert session is not None, "no active SparkSession: pass one"
    return DeltaTableBuilder(session, mode)


def _verify_str(value: Any, name: str) -> None:
    """delta-spark's ``_verify_type_str``."""
    if not isinstance(value, str):
        raise ValueError(f"{name} needs to be a string but got '{type(value)}'.")


def _refuse_clone(shallow: bool) -> NoReturn:
    copy = (
        "copy the rows instead: spark.read.format('delta').load(source)"
        ".write.format('delta').save(target) (add .option('versionAsOf', v) for a version)"
    )
    if not shallow:
        raise DeltaOperationError(
            "Deep clone is not supported by this Delta version.", fix=copy, code=DEEP_CLONE
        )
    unsupported(
        "shallow clone",
        "a shallow clone's files stay in the source folder, which delta-rs cannot read",
        copy,
    )


class DeltaOptimizeBuilder:
    """``optimize()``: ``where(partitionFilter)``, ``executeCompaction()``,
    ``executeZOrderBy(*columns)``; each returns delta-spark's one-row result."""

    def __init__(self, table: DeltaTable) -> None:
        self._table = table
        self._filters: list[tuple[str, str, Any]] | None = None

    def where(self, partitionFilter: str) -> DeltaOptimizeBuilder:
        """Only partitions matching ``col = 'value' [AND ...]`` (equality on partition columns,
        which is what delta-rs's compaction can select)."""
        filters = []
        for part in partitionFilter.split(" AND " if " AND " in partitionFilter else " and "):
            name, sep, value = part.partition("=")
            if not sep:
                raise DeltaOperationError(
                    f"optimize().where({partitionFilter!r}) is not an equality on partition "
                    "columns",
                    fix="use col = 'value' [AND col2 = 'value2']",
                )
            filters.append((name.strip().strip("`"), "=", value.strip().strip("'\"")))
        self._filters = filters
        return self

    def executeCompaction(self) -> DataFrame:
        return self._run(None)

    def executeZOrderBy(self, *columns: str | list[str]) -> DataFrame:
        return self._run(
            [c for item in columns for c in ([item] if isinstance(item, str) else item)]
        )

    def _run(self, z_order: list[str] | None) -> DataFrame:
        table = self._table
        metrics = table._change(
            lambda txn: operations.optimize(table._path, self._filters, z_order, txn)
        )
        row = (_uri(table._path), {k: str(v) for k, v in metrics.items()})
        return table._spark.createDataFrame([row], "path string, metrics map<string,string>")


PROTOCOL_PROPERTIES = ("delta.minreaderversion", "delta.minwriterversion")
"""Set to change the protocol (``upgradeTableProtocol``); delta-rs keeps them among the table's
properties, Delta does not (its ``DESCRIBE DETAIL`` shows them as the protocol's columns)."""


def _table_properties(configuration: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in configuration.items() if k.lower() not in PROTOCOL_PROPERTIES}


def _utc(millis: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(millis / 1000, dt.UTC) if millis else None


def _text_map(value: Any) -> dict[str, str] | None:
    if not isinstance(value, Mapping):
        return None
    return {str(k): v if isinstance(v, str) else _json(v) for k, v in value.items()}


def _json(value: Any) -> str:

    return json.dumps(value)


def _history_row(entry: Mapping[str, Any]) -> tuple:
    return (
        int(entry["version"]),
        entry["timestamp"],
        entry.get("operation"),
        _text_map(entry.get("operationParameters")),
        entry.get("readVersion"),
        entry.get("isolationLevel"),
        entry.get("isBlindAppend"),
        _text_map(entry.get("operationMetrics")),
        entry.get("userMetadata"),
        entry.get("engineInfo") or entry.get("clientVersion"),
    )


HISTORY_SCHEMA = T.StructType(
    [
        T.StructField("version", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("operation", T.StringType()),
        T.StructField("operationParameters", T.MapType(T.StringType(), T.StringType())),
        T.StructField("readVersion", T.LongType()),
        T.StructField("isolationLevel", T.StringType()),
        T.StructField("isBlindAppend", T.BooleanType()),
        T.StructField("operationMetrics", T.MapType(T.StringType(), T.StringType())),
        T.StructField("userMetadata", T.StringType()),
        T.StructField("engineInfo", T.StringType()),
    ]
)
DETAIL_SCHEMA = (
    "format string, id string, name string, description string, location string, "
    "createdAt timestamp, lastModified timestamp, partitionColumns array<string>, "
    "clusteringColumns array<string>, numFiles long, sizeInBytes long, "
    "properties map<string,string>, minReaderVersion int, minWriterVersion int, "
    "tableFeatures array<string>"
)
RESTORE_SCHEMA = (
    "table_size_after_restore long, num_of_files_after_restore long, num_removed_files long, "
    "num_restored_files long, removed_files_size long, restored_files_size long"
)


def arrow_of(frame: DataFrame) -> pa.Table:
    """A DataFrame as Arrow on the driver, never as Python rows: ``DataFrame.toArrow()``
    (Spark's Arrow collect: executors encode Arrow batches, the driver only concatenates).
    Timestamps arrive as UTC instants whatever the session time zone."""
    return frame.toArrow()


def _uri(path: str) -> str:
    """A table's location as delta-spark shows it: a ``file:`` URI locally, else the URI."""
    return path if storage.is_object_store(path) else "file:" + path
