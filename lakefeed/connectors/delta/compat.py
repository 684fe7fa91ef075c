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

from collections.abc import Callable
from typing import Any

from pyspark.sql.readwriter import DataFrameWriter
from pyspark.sql.streaming.readwriter import DataStreamWriter

from lakefeed.connectors.patching import (
    record_option,
    record_options,
    recorded,
    remember,
    text,
    wrap,
)
from lakefeed.errors import DeltaError

_ERROR_MODES = {"error", "errorifexists", "default"}


class DeltaTableExistsError(DeltaError, FileExistsError):
    """``save()`` in the default mode found a Delta table already there (Spark's behaviour)."""

    code = "DELTA_TABLE_EXISTS"


def _names(cols: tuple[Any, ...]) -> list[str]:
    if len(cols) == 1 and isinstance(cols[0], list | tuple):
        cols = tuple(cols[0])
    return [str(c) for c in cols]


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

            every = {**recorded(self), **{k: text(v) for k, v in options.items()}, "path": path}
            spec = write_spec(every, self._df.schema, overwrite=chosen == "overwrite")
            if _spark_writes_files(self, every, spec.partition_by):
                write_batch(self._df, spec, txn_option(every))
                return None
        return original(self, path, partitionBy=partitionBy, **options)

    return save


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
            every = {**recorded(self), **{k: text(v) for k, v in options.items()}}
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
                from lakefeed.connectors.delta.spark_files import SparkFilesSink
                from lakefeed.connectors.options import Options

                checkpoint = str(Options(every).get("checkpointLocation"))
                self.foreachBatch(SparkFilesSink(spec, checkpoint))
                return original(self, None, None, outputMode, None, queryName, **options)
        return original(self, path, format, outputMode, partitionBy, queryName, **options)

    return start


def _spark_writes_files(writer: Any, options: dict[str, str], partition_by: Any) -> bool:
    """Spark's own Parquet writer produces the data files, unless asked for or unsafe."""
    from lakefeed.connectors.delta.spark_files import WRITER_OPTION, applies
    from lakefeed.connectors.options import Options

    if getattr(writer, "_lakefeed_jvm_partitioned", False):
        return False  # partitionBy() came before format("delta"): Spark fixed it already
    chosen = Options(options).choice(WRITER_OPTION, ("spark", "python"), "spark")
    zone = writer._df.sparkSession.conf.get("spark.sql.session.timeZone") or "UTC"
    return chosen == "spark" and applies(writer._df.schema, list(partition_by), zone)


def install() -> None:
    """Install the wrappers (idempotent)."""
    writers: tuple[tuple[type, str, str, Callable[[Callable], Callable]], ...] = (
        (DataStreamWriter, "outputMode", "start", _start),
        (DataFrameWriter, "mode", "save", _save),
    )
    for cls, mode, finish, finisher in writers:
        wrap(cls, "partitionBy", _partition_by)
        wrap(cls, "format", remember("_lakefeed_format"))
        wrap(cls, mode, remember("_lakefeed_mode"))
        wrap(cls, "option", record_option)
        wrap(cls, "options", record_options)
        wrap(cls, finish, finisher)
