"""The Databricks-style surface: unchanged ``format("delta")`` / ``format("cloudFiles")`` code
reaches lakefeed's connectors. The only module that patches pyspark classes.

Spark's readers and writers keep their format and options in the JVM and never hand them back,
refuse the default save mode for Python data sources and drop ``partitionBy()`` for Python
sinks. The wrappers listed in :data:`PATCHES` record what the user set and, at ``load()``,
``save()`` or ``start()`` of a lakefeed format, call the connector's explicit functions
(``Connector.planned_stream``/``planned_read``; for Delta writes
:func:`~lakefeed.connectors.delta.adapters.batch_write` and
:func:`~lakefeed.connectors.delta.adapters.stream_sink`). Every other format goes to Spark's
method untouched: a non-Delta writer is left exactly as Spark made it.

lakefeed's own runtime never goes through here: it calls the explicit functions. ``install``
is called by ``lakefeed.spark_session()``; :func:`uninstall` restores pyspark's methods. The
wrappers are written for pyspark :data:`PYSPARK_VERSION`; another version is refused with a
clear error rather than patched blindly.

:data:`PATCHES` is every patch lakefeed makes to a pyspark class, module or object, one row
each, wherever it is put in: SDP's ``spark.read.table(name)`` (:func:`route_pipeline_reads`,
by :mod:`lakefeed.compat.sdp`), delta-spark's ``configure_spark_with_delta_pip`` builder
(:func:`patch_object`, by ``delta.pip_utils``) and pyspark's worker daemon (put in by
:mod:`lakefeed.spark.daemon` in Spark's Python worker processes, where nothing else of
lakefeed is imported). A census test scans lakefeed's code for any other.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import pyspark
import pyspark.daemon
from pyspark.sql import SparkSession
from pyspark.sql.readwriter import DataFrameReader, DataFrameWriter
from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

from lakefeed.compat.delta_spark.sql.run import sql as delta_sql
from lakefeed.compat.delta_spark.tables import _table_path
from lakefeed.compat.errors import PysparkVersionError
from lakefeed.connectors import registry
from lakefeed.connectors.base import Connector
from lakefeed.connectors.delta.adapters import batch_write, stream_sink
from lakefeed.core.flow_context import current_flow, outside_source, source_names, tapped
from lakefeed.delta.options import PARTITION_OPTION
from lakefeed.delta.schema import AUTO_MERGE
from lakefeed.delta.spark_write import WRITER_OPTION
from lakefeed.pipeline import api
from lakefeed.spark import daemon
from lakefeed.spark.foreach_batch import stop_aware
from lakefeed.spark.session import SessionExtension, spark_session

PYSPARK_VERSION = "4.3"
"""The pyspark minor version whose reader/writer signatures these wrappers copy."""

_MARK = "_lakefeed_wrapped"


# -- what each wrapper records on the reader/writer instance -----------------------------------


def _recorded(target: Any) -> dict[str, str]:
    """The options set so far on a reader or writer, as text."""
    if not hasattr(target, "_lakefeed_options"):
        target._lakefeed_options = {}
    return target._lakefeed_options


def _text(value: Any) -> str:
    """An option value as Spark turns it into text (booleans lower-case)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _every(target: Any, path: str | None, options: dict[str, Any]) -> dict[str, str]:
    every = {**_recorded(target), **{k: _text(v) for k, v in options.items()}}
    if path is not None:
        every["path"] = path
    return every


def _remember(attribute: str) -> Callable[[Callable], Callable]:
    def make(original: Callable) -> Callable:
        def remember(self: Any, value: Any = None, *args: Any, **kwargs: Any) -> Any:
            setattr(self, attribute, str(value).lower() if value is not None else None)
            return original(self, value, *args, **kwargs)

        return remember

    return make


def _record_option(original: Callable) -> Callable:
    def option(self: Any, key: str, value: Any) -> Any:
        _recorded(self)[str(key)] = _text(value)
        return original(self, key, value)

    return option


RESERVED = {"kafka": "lakefeed_kafka"}
"""Formats Spark reserves even without their jar, to the lakefeed format that reads them then."""
_SPARK_HAS: dict[tuple[int, str], bool] = {}


def _spark_has(spark: Any, name: str) -> bool:
    """Whether Spark itself reads format ``name`` (e.g. Kafka's jar is on the classpath);
    asked once per session. A Spark Connect session's server decides: True."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return True
    key = (id(spark._jsparkSession), name)
    if key not in _SPARK_HAS:
        sources = jvm.org.apache.spark.sql.execution.datasources.DataSource
        try:
            sources.lookupDataSource(name, spark._jsparkSession.sessionState().conf())
            _SPARK_HAS[key] = True
        except Exception:  # py4j's DATA_SOURCE_NOT_FOUND
            _SPARK_HAS[key] = False
    return _SPARK_HAS[key]


def _reader_format(original: Callable) -> Callable:
    """Remember the format; ``format("kafka")`` without Spark's Kafka jar reads with lakefeed's
    Kafka source, same options (``kafka.bootstrap.servers``, ``subscribe``, ...)."""

    def format(self: Any, source: str) -> Any:
        name = str(source)
        routed = RESERVED.get(name.lower())
        if routed in _CONNECTORS and not _spark_has(self._spark, name.lower()):
            name = routed
        self._lakefeed_format = name.lower()
        return original(self, name)

    return format


def _record_options(original: Callable) -> Callable:
    def options(self: Any, **values: Any) -> Any:
        _recorded(self).update({k: _text(v) for k, v in values.items()})
        return original(self, **values)

    return options


def _forget_format(original: Callable) -> Callable:
    """``foreachBatch``/``foreach`` make Spark ignore an earlier ``format``: so does lakefeed
    (docs.delta.io's ``.format("delta").foreachBatch(upsert).outputMode("update")``)."""

    def forget(self: Any, func: Any) -> Any:
        self._lakefeed_format = None
        return original(self, func)

    return forget


def _remember_schema(original: Callable) -> Callable:
    def schema(self: Any, value: Any) -> Any:
        self._lakefeed_schema = value
        return original(self, value)

    return schema


# -- the calls that may go to lakefeed: one way to build their wrappers ------------------------

Serve = Callable[..., Any]  # (pyspark's method, the reader or writer, its arguments by name)


def _routed(serve: Serve, ours: Callable[[Any, dict[str, Any]], bool]) -> Callable[..., Any]:
    """A wrapper of a reader's ``load`` or a writer's ``save``/``start``/``saveAsTable``/
    ``toTable``: the call's arguments bound by pyspark's own signature, ``format=`` applied as
    ``.format()`` would; then a call ``ours`` does not claim goes to pyspark's method as made,
    the others to ``serve(original, self, **arguments)``, by pyspark's parameter names
    (``options``: the ``**options``)."""

    def make(original: Callable) -> Callable:
        signature = inspect.signature(original)

        def routed(self: Any, *args: Any, **kwargs: Any) -> Any:
            call = signature.bind(self, *args, **kwargs)
            call.apply_defaults()
            arguments = call.arguments
            if arguments["format"] is not None:
                self.format(arguments["format"])
                arguments["format"] = None  # applied: Spark's method need not apply it again
            if not ours(self, arguments):
                return original(*call.args, **call.kwargs)
            named = {k: v for k, v in arguments.items() if k not in ("self", "format")}
            return serve(original, self, **named)

        return routed

    return make


# -- reads: a lakefeed format's planned reader first --------------------------------------------

_CONNECTORS: dict[str, Connector] = {}


def _planned_reader(reader: Any) -> Callable[..., Any] | None:
    """The planned reader of the lakefeed format ``reader`` reads, if any."""
    connector = _CONNECTORS.get(getattr(reader, "_lakefeed_format", None) or "")
    if connector is None:
        return None
    streaming = isinstance(reader, DataStreamReader)
    return connector.planned_stream if streaming else connector.planned_read


def _loads_routed(reader: Any, arguments: dict[str, Any]) -> bool:
    """A lakefeed format's, or any read while a test kit's tap stands in for sources."""
    path = arguments["path"]
    claimed = _planned_reader(reader) is not None or tapped()
    return claimed and (path is None or isinstance(path, str))


def _load(original: Callable, self: Any, path: str | None, schema: Any, options: dict) -> Any:
    """The read, handed to :func:`outside_source` (in a flow under test: maybe fed rows)."""
    names = source_names(path, _every(self, path, options))
    streaming = isinstance(self, DataStreamReader)
    return outside_source(lambda: _read(original, self, path, schema, options), names, streaming)


def _read(original: Callable, self: Any, path: str | None, schema: Any, options: dict) -> Any:
    planned = _planned_reader(self)
    if planned is None:  # Spark's own format, routed here only for the tap
        return original(self, path, None, schema, **options)
    flow = current_flow()
    if flow is not None:  # in a pipeline flow, as in DLT: e.g. cloudFiles.schemaLocation
        connector = _CONNECTORS[self._lakefeed_format]
        self.options(**connector.pipeline_defaults(flow.schema_path, _every(self, path, options)))
    fixed = schema if schema is not None else getattr(self, "_lakefeed_schema", None)
    frame = planned(self._spark, _every(self, path, options), fixed)
    return frame if frame is not None else original(self, path, None, schema, **options)


# -- writes: Delta's save modes, partitioning and Spark-written files ---------------------------


def _is_delta(writer: Any) -> bool:
    return getattr(writer, "_lakefeed_format", None) == "delta" and "delta" in _CONNECTORS


def _names(cols: tuple[Any, ...]) -> list[str]:
    if len(cols) == 1 and isinstance(cols[0], list | tuple):
        cols = tuple(cols[0])
    return [str(c) for c in cols]


def _partition_by(original: Callable) -> Callable:
    def partition_by(self: Any, *cols: Any) -> Any:
        names = _names(cols)
        self._lakefeed_partition_by = names
        if _is_delta(self):
            return self  # Spark refuses/drops it for a Python sink: save/start pass the option
        self._lakefeed_jvm_partitioned = bool(names)  # a later format("delta") must know
        return original(self, *cols)

    return partition_by


def _delta_options(
    writer: Any, path: str | None, options: dict[str, Any], streaming: bool
) -> dict[str, str]:

    every = _every(writer, path, options)
    names = getattr(writer, "_lakefeed_partition_by", None)
    if names and not any(k.lower() == PARTITION_OPTION.lower() for k in every):
        every[PARTITION_OPTION] = ",".join(names)
        writer.option(PARTITION_OPTION, every[PARTITION_OPTION])  # for the Python sink
    if streaming and getattr(writer, "_lakefeed_jvm_partitioned", False):
        every[WRITER_OPTION] = "python"  # Spark partitions this writer itself: no foreachBatch
    if _auto_merge(writer) and not any(k.lower() == "mergeschema" for k in every):
        every["mergeSchema"] = "true"
        writer.option("mergeSchema", "true")  # for the Python sink
    return every


def _auto_merge(writer: Any) -> bool:
    """Delta's session-wide ``mergeSchema`` (an explicit option still wins), as in delta-spark."""

    frame = getattr(writer, "_df", None)
    value = frame.sparkSession.conf.get(AUTO_MERGE, "false") if frame is not None else "false"
    return str(value).lower() == "true"


def _writes_delta(writer: Any, arguments: dict[str, Any]) -> bool:
    return _is_delta(writer)


def _saves_delta(writer: Any, arguments: dict[str, Any]) -> bool:
    """A Delta ``save()`` without a path is Spark's to refuse."""
    return _is_delta(writer) and arguments["path"] is not None


def _save(
    original: Callable, self: Any, path: str, mode: str | None, partitionBy: Any, options: dict
) -> None:
    if mode is not None:
        self.mode(mode)
    if partitionBy:
        self.partitionBy(partitionBy)
    every = _delta_options(self, path, options, streaming=False)
    remaining = batch_write(self._df, every, getattr(self, "_lakefeed_mode", None) or "error")
    if remaining is None:
        return None
    self.mode(remaining)
    return original(self, path, **options)


def _start(
    original: Callable,
    self: Any,
    path: str | None,
    outputMode: str | None,
    partitionBy: Any,
    queryName: str | None,
    options: dict,
) -> Any:
    if partitionBy:
        self.partitionBy(partitionBy)
    every = _delta_options(self, path, options, streaming=True)
    mode = outputMode or getattr(self, "_lakefeed_mode", None) or "append"
    sink = stream_sink(self._df, every, mode)
    if sink is None:
        return original(self, path, None, outputMode, None, queryName, **options)
    stop_aware(self, sink)
    return original(self, None, None, outputMode, None, queryName, **options)


# -- Delta tables by name: no metastore, a name is a folder ------------------------------------


def _named_delta(spark: Any, name: str) -> str:
    """Where a Delta table's name points, as ``DeltaTable.forName`` resolves it (the session's
    ``lakefeed.core.lakehouse``, a running flow's lakehouse, else Spark's warehouse layout)."""

    return _table_path(spark, name)


def _save_as_table(
    original: Callable, self: Any, name: str, mode: str | None, partitionBy: Any, options: dict
) -> None:
    location = _named_delta(self._spark, name)
    return self.save(location, mode=mode, partitionBy=partitionBy, **options)


def _to_table(
    original: Callable,
    self: Any,
    tableName: str,
    outputMode: str | None,
    partitionBy: Any,
    queryName: str | None,
    options: dict,
) -> Any:
    location = _named_delta(self._spark, tableName)
    return self.start(location, None, outputMode, partitionBy, queryName, **options)


def _read_table(original: Callable) -> Callable:
    def table(self: Any, tableName: str) -> Any:
        from lakefeed.delta import log  # deltalake, loaded by the first read by name

        # SDP's flows read the pipeline's datasets as spark.read.table(name) / readStream.table
        dataset = api.dataset_named(tableName)  # x, db.x, cat.db.x: the pipeline's database
        if dataset is not None:  # with the reader's options (DLT's skipChangeCommits)
            streaming, options = isinstance(self, DataStreamReader), dict(_recorded(self))
            return (api.read_stream if streaming else api.read)(dataset, **options)
        # A Delta table by name (no metastore), outside flows; Spark's tables and views win.
        named = "delta" in _CONNECTORS and current_flow() is None
        if named and not self._spark.catalog.tableExists(tableName):
            location = _named_delta(self._spark, tableName)
            if log.is_delta_table(location):
                return self.format("delta").load(location)
        streaming = isinstance(self, DataStreamReader)
        return outside_source(lambda: original(self, tableName), (tableName,), streaming)

    return table


def _session_table(original: Callable) -> Callable:
    def table(self: Any, tableName: str) -> Any:
        return self.read.table(tableName)  # through the reader's wrapper

    return table


def _session_sql(original: Callable) -> Callable:
    def sql(self: Any, sqlQuery: Any, args: Any = None, **kwargs: Any) -> Any:

        return delta_sql(self, original, sqlQuery, args, kwargs)

    return sql


def session_extension() -> SessionExtension:
    """lakefeed's connectors on a session, and pyspark's ``format(...)`` routed to them once it
    exists (for the whole process, until :func:`uninstall`)."""
    connectors = registry.session_extension()
    return replace(connectors, ready=lambda spark: install(registry.register(spark)))


def _lakefeed_session(original: Any) -> Callable[[], SparkSession]:
    """A builder's ``getOrCreate`` → :func:`lakefeed.spark_session` with the builder's settings
    (master, app name, remote and every ``config``)."""
    builder = original.__self__

    def get_or_create() -> SparkSession:
        settings = {key: str(value) for key, value in builder._options.items()}
        return spark_session(
            app_name=settings.pop("spark.app.name", "lakefeed"),
            master=settings.pop("spark.master", None),
            conf=settings,
            remote=settings.pop("spark.remote", None),
            extensions=(session_extension(),),
        )

    return get_or_create


# -- the table of every patch -------------------------------------------------------------------


@dataclass(frozen=True)
class Patch:
    """One patched pyspark attribute, why, and who puts it in.

    ``cls`` is the pyspark class (or module, or the class of the one object patched) whose
    ``method`` (or attribute) becomes ``make(original)``. ``by`` names the module that puts it
    in: this one's :func:`install` for most rows.
    """

    cls: type | ModuleType
    method: str
    make: Callable[..., Any]
    why: str
    by: str = __name__


def _reader_patches(cls: type) -> list[Patch]:
    return [
        Patch(cls, "format", _reader_format, "which format load() reads; kafka without its jar"),
        Patch(cls, "option", _record_option, "options a planned reader needs"),
        Patch(cls, "options", _record_options, "options a planned reader needs"),
        Patch(cls, "schema", _remember_schema, "a schema the user fixed"),
        Patch(
            cls,
            "load",
            _routed(_load, _loads_routed),
            "a lakefeed format is read by Spark's own readers",
        ),
    ]


def _writer_patches(cls: type, mode: str, finish: str, make: Callable) -> list[Patch]:
    return [
        Patch(cls, "format", _remember("_lakefeed_format"), "which format the write goes to"),
        Patch(cls, mode, _remember("_lakefeed_mode"), "Delta's save/output mode"),
        Patch(cls, "option", _record_option, "options a Delta write is checked with"),
        Patch(cls, "options", _record_options, "options a Delta write is checked with"),
        Patch(cls, "partitionBy", _partition_by, "Spark drops it for Python sinks"),
        Patch(cls, finish, make, "Delta writes: save modes, Spark-written files"),
    ]


READ_PATCHES: tuple[Patch, ...] = (
    *_reader_patches(DataFrameReader),
    *_reader_patches(DataStreamReader),
)
WRITE_PATCHES: tuple[Patch, ...] = (
    *_writer_patches(DataFrameWriter, "mode", "save", _routed(_save, _saves_delta)),
    *_writer_patches(DataStreamWriter, "outputMode", "start", _routed(_start, _writes_delta)),
    Patch(DataStreamWriter, "foreachBatch", _forget_format, "its sink replaces format('delta')"),
    Patch(DataStreamWriter, "foreach", _forget_format, "its sink replaces format('delta')"),
)
_TABLE_WHY = "a Delta table's name is a folder; SDP flows read datasets by name"
TABLE_READS: tuple[Patch, ...] = (
    Patch(DataFrameReader, "table", _read_table, _TABLE_WHY),
    Patch(DataStreamReader, "table", _read_table, _TABLE_WHY),
    Patch(SparkSession, "table", _session_table, "spark.table(name) reads as read.table"),
)
"""``read.table(name)`` / ``readStream.table(name)`` / ``spark.table(name)``: inside a flow, a
dataset of the pipeline (SDP's and DLT's way to read one, :func:`route_pipeline_reads`, also on
a session without the compatibility layer); elsewhere a Delta table by name."""
NAME_PATCHES: tuple[Patch, ...] = (
    Patch(
        DataFrameWriter,
        "saveAsTable",
        _routed(_save_as_table, _writes_delta),
        "a Delta table's name is a folder",
    ),
    Patch(
        DataStreamWriter,
        "toTable",
        _routed(_to_table, _writes_delta),
        "a Delta table's name is a folder",
    ),
    *TABLE_READS,
    Patch(SparkSession, "sql", _session_sql, "Delta SQL: delta.`path`, DML, DESCRIBE HISTORY.."),
)
"""Delta tables by name (no metastore): written and read at the folder ``DeltaTable.forName``
resolves a name to; names Spark's catalog knows stay Spark's. ``spark.sql`` serves Delta's SQL
(:mod:`lakefeed.compat.delta_spark.sql`): statements touching no Delta table reach Spark's method as
given."""
INSTALLED: tuple[Patch, ...] = READ_PATCHES + WRITE_PATCHES + NAME_PATCHES
"""The rows :func:`install` may put in (:func:`route_pipeline_reads`: :data:`TABLE_READS`)."""
DELTA_PIP = Patch(
    SparkSession.Builder,
    "getOrCreate",
    _lakefeed_session,
    "configure_spark_with_delta_pip(builder): that one builder's session is lakefeed's",
    by="delta.pip_utils",
)
DAEMON = Patch(
    pyspark.daemon,
    "traceback",
    daemon.quiet_traceback,
    "Python worker processes: no traceback when Spark closed a failed task's socket first",
    by=daemon.__name__,
)
PATCHES: tuple[Patch, ...] = (*INSTALLED, DELTA_PIP, DAEMON)
"""Every patch lakefeed makes to pyspark, one row each (see the module doc)."""

_ORIGINALS: dict[tuple[type | ModuleType, str], Callable] = {}


def check_version(version: str = pyspark.__version__) -> None:
    """Refuse a pyspark whose reader/writer methods these wrappers were not written for."""
    if version.split(".")[:2] != PYSPARK_VERSION.split("."):
        raise PysparkVersionError(
            f"lakefeed's format('delta')/format('cloudFiles') compatibility layer is written "
            f"for pyspark {PYSPARK_VERSION}.x, this is pyspark {version}",
            fix=f"install pyspark {PYSPARK_VERSION}.x, or use lakefeed's explicit functions "
            "(lakefeed.connectors.delta.read_stream/write_stream...) with "
            "spark_session(compat=False)",
        )


def install(connectors: Iterable[Connector]) -> None:
    """Route the formats of ``connectors`` through lakefeed (idempotent; the latest call's
    connectors are routed). Delta's writer wrappers are installed only when Delta is among them
    (not when delta-spark serves ``delta``)."""
    check_version()
    _CONNECTORS.clear()
    _CONNECTORS.update({f.lower(): c for c in connectors for f in c.formats})
    readers = any(c.planned_stream or c.planned_read for c in _CONNECTORS.values())
    delta = "delta" in _CONNECTORS
    for patch in (READ_PATCHES if readers else ()) + (
        WRITE_PATCHES + NAME_PATCHES if delta else ()
    ):
        _wrap(patch)


def route_pipeline_reads() -> None:
    """Put in :data:`TABLE_READS`, so ``spark.read.table(name)`` (SDP's) and ``spark.table``
    read the pipeline's datasets while a flow is evaluated (idempotent; until
    :func:`uninstall`)."""
    check_version()
    for patch in TABLE_READS:
        _wrap(patch)


def patch_object(patch: Patch, target: Any) -> None:
    """Put ``patch`` in on ``target`` alone (an instance of ``patch.cls``): its class stays."""
    setattr(target, patch.method, patch.make(getattr(target, patch.method)))


def uninstall() -> None:
    """Restore every wrapped pyspark method; lakefeed's formats stay registered and readable
    through the explicit functions."""
    for (cls, name), original in _ORIGINALS.items():
        setattr(cls, name, original)
    _ORIGINALS.clear()
    _CONNECTORS.clear()


def installed() -> list[tuple[type | ModuleType, str]]:
    """The pyspark methods wrapped right now, as (class, method name)."""
    return list(_ORIGINALS)


def _wrap(patch: Patch) -> None:
    key = (patch.cls, patch.method)
    if key in _ORIGINALS:
        return
    original = getattr(patch.cls, patch.method)
    wrapped = functools.wraps(original)(patch.make(original))
    setattr(wrapped, _MARK, True)
    _ORIGINALS[key] = original
    setattr(patch.cls, patch.method, wrapped)
