"""Small patches that let unchanged Databricks-style writer code reach lakefeed's ``delta``.

Spark drops ``partitionBy()`` for Python sinks and refuses the default save mode
(ErrorIfExists) and ``ignore`` for Python data sources. These wrappers keep the user's code
as it is: ``partitionBy`` also sets the ``partitionBy`` option, and for ``format("delta")``
the error/ignore modes are decided here (the table exists or not) and written as an append.
A Python sink sees its options only when the first micro-batch is planned, so a stream write
to ``delta`` is checked in ``start()`` (checkpoint, schema, partitions, output mode) and misuse
is refused before any query exists; ``start()`` then hands the batches to Spark's own Parquet
writer through ``foreachBatch``, and a batch ``save()`` goes to that writer too (see
``spark_files``). Installed once by ``register(spark)``; other formats pass through untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pyspark.sql.readwriter import DataFrameWriter
from pyspark.sql.streaming.readwriter import DataStreamWriter

_MARK = "_lakefeed_wrapped"
_ERROR_MODES = {"error", "errorifexists", "default"}


class DeltaTableExistsError(FileExistsError):
    """``save()`` in the default mode found a Delta table already there (Spark's behaviour)."""


def _names(cols: tuple[Any, ...]) -> list[str]:
    if len(cols) == 1 and isinstance(cols[0], list | tuple):
        cols = tuple(cols[0])
    return [str(c) for c in cols]


def _wrap(cls: type, name: str, make: Callable[[Callable], Callable]) -> None:
    original = getattr(cls, name)
    if getattr(original, _MARK, False):
        return
    wrapped = functools.wraps(original)(make(original))
    setattr(wrapped, _MARK, True)
    setattr(cls, name, wrapped)


def _partition_by(original: Callable) -> Callable:
    def partition_by(self: Any, *cols: Any) -> Any:
        names = _names(cols)
        if getattr(self, "_lakefeed_format", None) == "delta" and names:
            # Spark refuses partitioning for a batch write to a Python data source and drops
            # it for a stream: the option alone carries it.
            return self.option("partitionBy", ",".join(names))
        result = original(self, *cols)
        self._lakefeed_jvm_partitioned = True  # Spark then refuses foreachBatch for this writer
        return result.option("partitionBy", ",".join(names)) if names else result

    return partition_by


def _remember(attribute: str) -> Callable[[Callable], Callable]:
    def make(original: Callable) -> Callable:
        def remember(self: Any, value: Any = None, *args: Any, **kwargs: Any) -> Any:
            setattr(self, attribute, str(value).lower() if value is not None else None)
            return original(self, value, *args, **kwargs)

        return remember

    return make


def _save(original: Callable) -> Callable:
    def save(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: Any = None,
        **options: Any,
    ) -> None:
        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        chosen = getattr(self, "_lakefeed_mode", None) or "errorifexists"
        is_delta = getattr(self, "_lakefeed_format", None) == "delta"
        if is_delta and partitionBy:
            self.partitionBy(partitionBy)
            partitionBy = None
        if is_delta and path is not None and chosen in _ERROR_MODES | {"ignore"}:
            from lakefeed.connectors.delta.datasource import table_root
            from lakefeed.connectors.delta.log import is_delta_table

            if is_delta_table(table_root({"path": path})):
                if chosen == "ignore":
                    return None
                raise DeltaTableExistsError(
                    f"the Delta table {path} already exists: use .mode('append') to add "
                    "rows or .mode('overwrite') to replace them"
                )
            self.mode("append")
            chosen = "append"
        if is_delta and path is not None:
            from lakefeed.connectors.delta.datasource import txn_option, write_spec
            from lakefeed.connectors.delta.spark_files import write_batch

            every = {**_recorded(self), **{k: _text(v) for k, v in options.items()}, "path": path}
            spec = write_spec(every, self._df.schema, overwrite=chosen == "overwrite")
            if _spark_writes_files(self, every, spec.partition_by):
                write_batch(self._df, spec, txn_option(every))
                return None
        return original(self, path, partitionBy=partitionBy, **options)

    return save


def _record_option(original: Callable) -> Callable:
    def record(self: Any, key: str, value: Any) -> Any:
        _recorded(self)[str(key)] = _text(value)
        return original(self, key, value)

    return record


def _record_options(original: Callable) -> Callable:
    def record(self: Any, **options: Any) -> Any:
        _recorded(self).update({k: _text(v) for k, v in options.items()})
        return original(self, **options)

    return record


def _recorded(writer: Any) -> dict[str, str]:
    if not hasattr(writer, "_lakefeed_options"):
        writer._lakefeed_options = {}
    return writer._lakefeed_options


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _start(original: Callable) -> Callable:
    def start(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        outputMode: str | None = None,
        partitionBy: Any = None,
        queryName: str | None = None,
        **options: Any,
    ) -> Any:
        chosen = (format or getattr(self, "_lakefeed_format", None) or "").lower()
        if chosen == "delta":
            from lakefeed.connectors.delta.datasource import check_stream_write

            if format is not None:
                self.format(format)  # so that partitionBy below sees the delta format
                format = None
            if partitionBy:
                self.partitionBy(partitionBy)
                partitionBy = None
            every = {**_recorded(self), **{k: _text(v) for k, v in options.items()}}
            if path is not None:
                every["path"] = path
            mode = (outputMode or getattr(self, "_lakefeed_mode", None) or "append").lower()
            if mode == "update":
                raise ValueError(
                    "a stream writes a Delta table in outputMode 'append' or 'complete', not "
                    "'update' (it would append every updated row again): use append with a "
                    "watermark, complete, or foreachBatch with a MERGE"
                )
            spec = check_stream_write(every, self._df.schema, complete=mode == "complete")
            if _spark_writes_files(self, every, spec.partition_by):
                from lakefeed.connectors.delta.datasource import option
                from lakefeed.connectors.delta.spark_files import SparkFilesSink

                checkpoint = str(option(every, "checkpointLocation"))
                self.foreachBatch(SparkFilesSink(spec, checkpoint))
                return original(self, None, None, outputMode, None, queryName, **options)
        return original(self, path, format, outputMode, partitionBy, queryName, **options)

    return start


def _spark_writes_files(writer: Any, options: dict[str, str], partition_by: Any) -> bool:
    """Spark's own Parquet writer produces the data files, unless asked for or unsafe."""
    from lakefeed.connectors.delta.datasource import option
    from lakefeed.connectors.delta.spark_files import WRITER_OPTION, applies

    if getattr(writer, "_lakefeed_jvm_partitioned", False):
        return False  # partitionBy() came before format("delta"): Spark fixed it already
    chosen = (option(options, WRITER_OPTION) or "spark").lower()
    if chosen not in ("spark", "python"):
        raise ValueError(f"option {WRITER_OPTION} is 'spark' (default) or 'python', not {chosen!r}")
    zone = writer._df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    return chosen == "spark" and applies(writer._df.schema, list(partition_by), zone)


def install() -> None:
    """Install the wrappers (idempotent)."""
    _wrap(DataStreamWriter, "partitionBy", _partition_by)
    _wrap(DataStreamWriter, "format", _remember("_lakefeed_format"))
    _wrap(DataStreamWriter, "outputMode", _remember("_lakefeed_mode"))
    _wrap(DataStreamWriter, "option", _record_option)
    _wrap(DataStreamWriter, "options", _record_options)
    _wrap(DataStreamWriter, "start", _start)
    _wrap(DataFrameWriter, "partitionBy", _partition_by)
    _wrap(DataFrameWriter, "format", _remember("_lakefeed_format"))
    _wrap(DataFrameWriter, "mode", _remember("_lakefeed_mode"))
    _wrap(DataFrameWriter, "option", _record_option)
    _wrap(DataFrameWriter, "options", _record_options)
    _wrap(DataFrameWriter, "save", _save)
