"""Landed files read by Spark's own JSON, CSV or Parquet reader, for a stream planned in Python.

The cloudFiles stream keeps its discovery, file log, limits and cleanup in Python (see
:mod:`lakefeed.spark.jvm`) and, by default, hands each batch's files to Spark's reader, which parses
only the columns the query uses, drops filtered rows while parsing and starts no Python worker.
Its rules are Spark's: a malformed record or a value of the wrong type fails the batch (mode
``FAILFAST``, never a silent null). The ``_metadata`` column comes from Spark's own hidden file
metadata, free unless selected (the JVM rule ``PruneUnusedFileMetadata`` drops it from the scan
of a query that does not read it). What Spark's parsers cannot give as lakefeed's reader does
(rescued data: Spark 4.3's JSON and CSV readers only know ``columnNameOfCorruptRecord``, the
whole record, and drop unknown fields; schema evolution; skipped-file records) keeps lakefeed's
reader by default and is refused when ``lakefeed.reader=spark`` is asked for.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, DataFrameReader, SparkSession

from lakefeed.connectors.files.options import OptionError
from lakefeed.connectors.files.plan import ReadPlan
from lakefeed.connectors.files.schemas import METADATA_COLUMN, METADATA_TYPE
from lakefeed.core.options import Options
from lakefeed.core.storage import is_object_store
from lakefeed.spark.jvm.bridge import READER_OPTION


@dataclass(frozen=True)
class ReaderChoice:
    """Which reader parses a stream's files (``spark`` or ``python``) and why, for the log,
    the flow's events and ``lakefeed status``."""

    reader: str
    why: str

    def __str__(self) -> str:
        return f"{_NAMES[self.reader]} ({self.why})"


_NAMES = {
    "spark": "Spark's reader",
    "python": "lakefeed's reader",
    "arrow": "lakefeed's Arrow reader, parsing only what the flow uses",
}
CHOICES = tuple(_NAMES)
"""Values of ``lakefeed.reader`` on a cloudFiles stream."""


def refusal(plan: ReadPlan) -> str | None:
    """Why Spark's reader cannot read this stream as lakefeed's would; None when it can."""
    opts = plan.opts
    if plan.rescue_column is not None:
        return (
            f"it has a rescued-data column ({plan.rescue_column}): give a fixed schema without one"
        )
    if plan.evolution_mode != "none":
        return f"schemaEvolutionMode {plan.evolution_mode} needs lakefeed's reader"
    if opts.ignore_corrupt_files or opts.ignore_missing_files:
        return "skipped files are recorded by lakefeed's reader only (ignoreCorrupt/MissingFiles)"
    return None


def ahead(
    options: Mapping[str, str], spark_available: bool, reaches_files: bool = True
) -> ReaderChoice | None:
    """The choice made before the stream's schema is known (nothing is read for it): lakefeed's
    reader when asked for, when the session cannot plan streams (Spark Connect, no jar), or when
    it cannot reach the landing folder (``reaches_files``: an ``s3://`` folder in a session
    without S3A, which cannot be added to a running session); None: :func:`choose` decides
    from the stream's plan."""
    wanted = Options(options).choice(READER_OPTION, CHOICES)
    if wanted == "python":
        return ReaderChoice("python", f"{READER_OPTION}=python")
    if not spark_available:
        return ReaderChoice("python", "this session cannot plan streams (Spark Connect or no jar)")
    if wanted == "arrow":
        return None  # reads through its own storage clients, S3A or not
    if not reaches_files:
        why = "the landing folder is on S3 and this session has no S3A connector"
        if wanted == "spark":
            raise OptionError(
                f"{READER_OPTION}=spark cannot read this cloudFiles stream: {why}",
                fix="start the session with the folder among its storage "
                "(lakefeed.spark_session(storage=[...]) or an s3:// --lakehouse), or drop "
                f"{READER_OPTION} to keep lakefeed's reader",
            )
        return ReaderChoice("python", why)
    return None


def reaches(spark: SparkSession, options: Mapping[str, str]) -> bool:
    """Whether Spark's readers can open the landing folder: a local one always; an object-store
    URI when the session maps its scheme to a Hadoop file system (S3A, see
    :mod:`lakefeed.spark.s3a`)."""
    path = Options(options).get("path") or ""
    if not is_object_store(path):
        return True
    scheme = path.split("://", 1)[0].lower()
    return bool(spark.conf.get(f"spark.hadoop.fs.{scheme}.impl", None))


def choose(plan: ReadPlan, options: Mapping[str, str]) -> ReaderChoice:
    """Spark's reader unless the stream needs something only lakefeed's reader does. An explicit
    ``lakefeed.reader=spark`` is kept even then: the caller refuses it with :func:`refusal`."""
    wanted = Options(options).choice(READER_OPTION, CHOICES)
    if wanted in ("spark", "arrow"):
        return ReaderChoice(wanted, f"{READER_OPTION}={wanted}")
    reason = refusal(plan)
    if reason is not None:
        return ReaderChoice("python", reason)
    return ReaderChoice("spark", "the default: nothing here needs lakefeed's reader")


class SparkFiles:
    """Each batch's rows, parsed by Spark, in one Py4J call (``PlannedFiles.read``, Java): the
    reader is built once per stream and the ``_metadata`` projection is SQL text, since each
    call into the JVM costs a round trip on the driver inside the batch's ``getBatch``. Built
    in Python a batch cost 176 round trips, then 26 with the reader and columns kept (a path
    and a column each: a Python list crosses Py4J element by element), now one; the projection
    of pyspark ``Column`` calls cost ~290 round trips more at each query's first batch
    (measured with ``bench/ysb/trace.py --profile``)."""

    def __init__(self, spark: SparkSession, plan: ReadPlan) -> None:
        self._spark = spark
        self._reader = _reader(spark, plan)._jreader
        self._read = spark._jvm.dev.lakefeed.spark.PlannedFiles.read  # type: ignore[union-attr]
        self._projection = (
            json.dumps([*map(_quoted, plan.data_schema.names), _FILE_METADATA])
            if plan.include_metadata
            else None
        )

    def frame(self, paths: Sequence[str]) -> DataFrame:
        """The rows of ``paths`` in the stream's schema."""
        return DataFrame(
            self._read(self._reader, json.dumps(list(paths)), self._projection), self._spark
        )


def _reader(spark: SparkSession, plan: ReadPlan) -> DataFrameReader:
    opts = plan.opts
    # Paths come from the file log, never patterns: a '[' in a name must not glob.
    reader = spark.read.format(opts.format).options(**opts.hadoop)  # fs.s3a.*: S3A per read
    reader = reader.schema(plan.data_schema).option("__globPaths__", "false")
    if opts.format == "json":
        return reader.options(mode="FAILFAST", multiLine=str(opts.multi_line).lower())
    if opts.format == "csv":
        return reader.options(
            mode="FAILFAST",
            header=str(opts.header).lower(),
            enforceSchema="false",  # a header that names other columns fails, as ours does
            sep=opts.sep,
            quote=opts.quote,
            multiLine=str(opts.multi_line).lower(),
            **({"escape": opts.escape} if opts.escape is not None else {}),
        )
    return reader


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _decoded(field: str, encoded: str) -> str:
    """``encoded`` (URI-escaped, where '+' is itself) decoded, non-null as the type says."""
    plain = f"url_decode(replace({encoded}, '+', '%2B'))"  # else '+' reads as ' '
    return f"coalesce({plain}, _metadata.{field}) AS {field}"


_FILE_METADATA = (
    "struct("
    + ", ".join(
        [
            _decoded("file_path", "regexp_replace(_metadata.file_path, '^file:(//)?', '')"),
            _decoded("file_name", "_metadata.file_name"),
            *(f"_metadata.{field} AS {field}" for field in METADATA_TYPE.names[2:]),
        ]
    )
    + f") AS {METADATA_COLUMN}"
)
"""lakefeed's ``_metadata`` struct from Spark's hidden one, as SQL: the same fields, with the
file path as the file log has it and the name decoded (Spark gives ``file:/a%20b`` and ``a%20b``
for ``/a b``; an ``s3://`` URI keeps its scheme)."""
