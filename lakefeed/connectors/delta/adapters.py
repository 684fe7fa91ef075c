"""Reading and writing Delta tables from Spark by explicit calls: what lakefeed's runtime uses.

``read_stream``/``read`` give a DataFrame read by Spark's own Parquet reader over files the
Python side plans (:mod:`~lakefeed.delta.spark_read`), else by the ``delta`` Python
data source. ``write_stream``/``write`` have Spark's Parquet writer produce the data files and
commit them through delta-rs (:mod:`~lakefeed.delta.spark_write`), else hand the rows
to the Python sink. None of them relies on a patched pyspark method; the Databricks-style
surface (``df.write.format("delta")``...) in :mod:`lakefeed.compat.patches` calls
:func:`stream_sink` and :func:`batch_write` below, so both ways decide alike.

Spark drops ``partitionBy()`` for Python sinks and refuses the default save mode (ErrorIfExists)
and ``ignore`` for Python data sources: here partition columns travel as the ``partitionBy``
option and the error/ignore modes are decided before Spark sees the write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from lakefeed.connectors.base import start_query
from lakefeed.connectors.delta import CONNECTOR
from lakefeed.connectors.delta.datasource import check_stream_write, write_spec
from lakefeed.connectors.delta.errors import DeltaTableExistsError
from lakefeed.core.errors import OptionError
from lakefeed.core.options import Options
from lakefeed.delta import generated, log, replace
from lakefeed.delta.options import PARTITION_OPTION, register_settings, table_root, txn_option
from lakefeed.delta.snapshot import Snapshot
from lakefeed.delta.spark_write import (
    TIMESTAMP_CONF,
    WRITER_OPTION,
    SparkFilesSink,
    applies,
    default_writer,
    in_place,
    write_batch,
)
from lakefeed.spark.foreach_batch import stop_aware

_ERROR_MODES = {"error", "errorifexists", "default"}


def read_stream(spark: SparkSession, path: str, **options: str) -> DataFrame:
    """``spark.readStream.format("delta").load(path)``: the table's changes as a stream."""
    return CONNECTOR.read(spark, path, options, streaming=True)


def read(spark: SparkSession, path: str, **options: str) -> DataFrame:
    """``spark.read.format("delta").load(path)``: a snapshot (``versionAsOf``... honoured)."""
    return CONNECTOR.read(spark, path, options, streaming=False)


def write_stream(
    frame: DataFrame,
    path: str,
    checkpoint: str,
    *,
    output_mode: str = "append",
    partition_by: Sequence[str] = (),
    query_name: str | None = None,
    trigger: Mapping[str, Any] | None = None,
    **options: str,
) -> StreamingQuery:
    """Start a query writing ``frame`` into the Delta table at ``path`` (exactly once per batch,
    by the query id in ``checkpoint``); ``trigger`` as for ``DataStreamWriter.trigger``."""
    every = _with_partitions({**options, "path": path}, partition_by)
    every["checkpointLocation"] = checkpoint
    sink = stream_sink(frame, every, output_mode)
    if sink is not None:
        writer = stop_aware(frame.writeStream, sink)
    else:
        writer = frame.writeStream.format("delta").options(**every).option(WRITER_OPTION, "python")
    return start_query(
        writer, checkpoint, output_mode=output_mode, query_name=query_name, trigger=trigger
    )


def write(
    frame: DataFrame,
    path: str,
    *,
    mode: str = "errorifexists",
    partition_by: Sequence[str] = (),
    **options: str,
) -> None:
    """Write ``frame`` into the Delta table at ``path`` in one commit, Spark's save modes."""
    every = _with_partitions({**options, "path": path}, partition_by)
    remaining = batch_write(frame, every, mode)
    if remaining is not None:
        writer = frame.write.format("delta").mode(remaining).options(**every)
        writer.option(WRITER_OPTION, "python").save()


def stream_sink(
    frame: DataFrame, options: Mapping[str, str], output_mode: str
) -> SparkFilesSink | None:
    """Check a stream write before any query exists (a Python sink would see its options only at
    the first batch); the ``foreachBatch`` body when Spark writes the files, None for the Python
    sink."""
    mode = output_mode.lower()
    if mode == "update":
        raise ValueError(
            "a stream writes a Delta table in outputMode 'append' or 'complete', not "
            "'update' (it would append every updated row again): use append with a "
            "watermark, complete, or foreachBatch with a MERGE"
        )
    spec = check_stream_write(options, frame.schema, complete=mode == "complete")
    if not spark_writes_files(frame, options, spec.partition_by, spec.root):
        generated.refuse_python_sink(spec.computed, spec.root)
        return None
    return SparkFilesSink(spec, str(Options(options).get("checkpointLocation")))


def batch_write(frame: DataFrame, options: Mapping[str, str], mode: str) -> str | None:
    """Do the part of a batch write Spark's Python sink cannot: the error/ignore save modes, and
    the write itself when Spark's writer can produce the files. None when nothing is left to do,
    else the mode (``append``/``overwrite``) the Python data source writes with."""
    chosen = mode.lower()
    if chosen in _ERROR_MODES | {"ignore"}:
        if log.is_delta_table(register_settings(options)):
            if chosen == "ignore":
                return None
            raise DeltaTableExistsError(
                f"the Delta table {Options(options).get('path')} already exists: use "
                ".mode('append') to add rows or .mode('overwrite') to replace them"
            )
        chosen = "append"
    session_mode = frame.sparkSession.conf.get("spark.sql.sources.partitionOverwriteMode")
    where = replace.predicate(options, chosen, session_mode)
    snapshot = Snapshot(table_root(options))
    spec = write_spec(options, frame.schema, chosen == "overwrite", snapshot=snapshot)
    if where is not None:
        replace.replace_where(frame, spec, where, txn_option(options))
        return None
    if not spark_writes_files(frame, options, spec.partition_by, spec.root):
        generated.refuse_python_sink(spec.computed, spec.root)
        return chosen
    write_batch(frame, spec, txn_option(options), snapshot)
    return None


def spark_writes_files(
    frame: DataFrame, options: Mapping[str, str], partition_by: Any, root: str
) -> bool:
    """Spark's own Parquet writer produces the data files, unless asked for, unsafe, or the
    table is on object storage and Spark could only stage them
    (:func:`~lakefeed.delta.spark_write.default_writer`)."""
    default = default_writer(root, in_place(frame.sparkSession))
    chosen = Options(options, OptionError).choice(WRITER_OPTION, ("spark", "python"), default)
    conf = frame.sparkSession.conf
    return chosen == "spark" and applies(
        frame.schema,
        list(partition_by),
        conf.get("spark.sql.session.timeZone") or "UTC",
        conf.get(TIMESTAMP_CONF) or "INT96",
    )


def _with_partitions(options: dict[str, str], partition_by: Sequence[str]) -> dict[str, str]:
    if partition_by:
        options[PARTITION_OPTION] = ",".join(partition_by)
    return options
