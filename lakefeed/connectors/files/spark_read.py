"""Landed files read by Spark's own JSON, CSV or Parquet reader, for a stream planned in Python.

With ``lakefeed.reader=spark`` the cloudFiles stream keeps its discovery, file log, limits and
cleanup in Python (see :mod:`lakefeed.jvm`), and hands each batch's files to Spark's reader,
which parses only the columns the query uses, drops filtered rows while parsing and starts no
Python worker. Its rules are Spark's: a malformed record or a value of the wrong type fails
the batch (mode ``FAILFAST``, never a silent null). It takes no part in what lakefeed's reader
adds, so a stream that needs any of that is refused rather than quietly losing it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession

from lakefeed.connectors.files.plan import ReadPlan


def refusal(plan: ReadPlan) -> str | None:
    """Why Spark's reader cannot read this stream as lakefeed's would; None when it can."""
    opts = plan.opts
    if plan.rescue_column is not None:
        return (
            f"it has a rescued-data column ({plan.rescue_column}): give a fixed schema without one"
        )
    if plan.include_metadata:
        return "it has the _metadata column: set includeMetadata=false"
    if plan.evolution_mode != "none":
        return f"schemaEvolutionMode {plan.evolution_mode} needs lakefeed's reader"
    if opts.ignore_corrupt_files or opts.ignore_missing_files:
        return "skipped files are recorded by lakefeed's reader only (ignoreCorrupt/MissingFiles)"
    return None


def files_frame(spark: SparkSession, paths: Sequence[str], plan: ReadPlan) -> DataFrame:
    """The rows of ``paths`` in the stream's schema, parsed by Spark."""
    opts = plan.opts
    # Paths come from the file log, never patterns: a '[' in a name must not glob.
    reader = (
        spark.read.format(opts.format).schema(plan.data_schema).option("__globPaths__", "false")
    )
    if opts.format == "json":
        reader = reader.options(mode="FAILFAST", multiLine=str(opts.multi_line).lower())
    elif opts.format == "csv":
        reader = reader.options(
            mode="FAILFAST",
            header=str(opts.header).lower(),
            enforceSchema="false",  # a header that names other columns fails, as ours does
            sep=opts.sep,
            quote=opts.quote,
            multiLine=str(opts.multi_line).lower(),
            **({"escape": opts.escape} if opts.escape is not None else {}),
        )
    return reader.load(list(paths))
