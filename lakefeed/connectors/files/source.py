"""Spark adapter: the ``cloudFiles`` Python data source over the Spark-free core.

Spark builds the stream reader in three places: the planning worker (only to pickle ``read``
for executors), the long-lived driver-side runner (offsets, partitions, commit) and, through
the pickle, every task. So the reader's constructor is cheap and the file log and the lock are
opened lazily, on the first offset call, in the runner only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lakefeed.connectors import packing
from lakefeed.connectors.files import arrow_read, spark_read
from lakefeed.connectors.files.cleanup import clean_committed
from lakefeed.connectors.files.filelog import (
    LOG_END_OPTION,
    FileEntry,
    FileLog,
    acquire_lock,
    committed_files,
    list_files,
    skipped_dir,
    state_dir,
    write_json,
)
from lakefeed.connectors.files.options import (
    DEFAULT_MAX_FILES,
    DEFAULT_RESCUE_COLUMN,
    FileSourceOptions,
    OptionError,
    schema_location_of,
)
from lakefeed.connectors.files.plan import ReadPlan
from lakefeed.connectors.files.schemas import (
    METADATA_COLUMN,
    METADATA_TYPE,
    SchemaStore,
    apply_hints,
    infer_schema,
    output_schema,
    parse_ddl,
)
from lakefeed.core import storage
from lakefeed.core.logs import get_logger
from lakefeed.spark.jvm import bridge

log = get_logger("lakefeed.connectors.files")


class FilesPartition(InputPartition):
    """The files one task reads (picklable, small)."""

    def __init__(self, entries: list[FileEntry]):
        super().__init__(None)
        self.entries = entries


def plan_partitions(entries: Sequence[FileEntry], slots: int) -> list[FilesPartition]:
    """Pack files into tasks like Spark (:mod:`lakefeed.connectors.packing`)."""
    return [FilesPartition(p) for p in packing.pack(entries, lambda e: e.size, slots)]


def cap_end(
    entries: Sequence[FileEntry], start: int, top: int, max_files: int | None, max_bytes: int | None
) -> int:
    """End index of a batch from ``start`` under the limits (always at least one file)."""
    end = top if max_files is None else min(top, start + max_files)
    if max_bytes is not None and end > start:
        budget = 0
        for index in range(start, end):
            budget += entries[index - start].size
            if budget > max_bytes and index > start:
                return index
    return end


class CloudFilesStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"sourceId", "index"}``: an index into the stream's discovered-file log."""

    def __init__(self, opts: FileSourceOptions, plan: ReadPlan, arrow: str | None = None):
        self.opts = opts
        self.plan = plan
        self.arrow = arrow  # in a planned stream: its description, read by the Arrow reader
        self._log: FileLog | None = None
        self._lock: IO[str] | None = None
        self._target: int | None = None
        self._done: int | None = None  # committed index, loaded from the state folder once
        self._spark_files: spark_read.SparkFiles | arrow_read.ArrowFiles | None = None  # first use

    def __getstate__(self) -> dict[str, Any]:
        # Tasks need only the options and the plan, never the log or the lock.
        return {
            **self.__dict__,
            "_log": None,
            "_lock": None,
            "_target": None,
            "_done": None,
            "_spark_files": None,
        }

    # ------------------------------------------------------------------ driver-side state
    @property
    def filelog(self) -> FileLog:
        if self._log is None:
            location = self.opts.require_schema_location()
            self._lock = acquire_lock(state_dir(location))
            self._log = FileLog.open(location, self.opts.matcher, self.opts.include_existing_files)
        return self._log

    def _offset(self, index: int) -> dict[str, Any]:
        return {"sourceId": self.filelog.source_id, "index": index}

    def _index(self, offset: dict[str, Any]) -> int:
        if offset.get("sourceId") != self.filelog.source_id:
            raise OptionError(
                f"the checkpoint's file offsets belong to another file log than the one in "
                f"{self.opts.schema_location} (source id {offset.get('sourceId')} vs "
                f"{self.filelog.source_id}): the schema location was changed or recreated. "
                "Restore it, or start this stream with a new checkpoint."
            )
        return int(offset["index"])

    # ------------------------------------------------------------------------- offsets
    def initialOffset(self) -> dict[str, Any]:
        return self._offset(0)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_bytes_per_trigger and not self.opts.max_files_per_trigger:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadMaxFiles(self.opts.max_files_per_trigger or DEFAULT_MAX_FILES)

    def prepareForTriggerAvailableNow(self) -> None:
        self.filelog.discover()
        self._target = len(self.filelog)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = self._index(start)
        # Spark plans a batch only once the previous one is in its commit log, so everything
        # before ``start`` is committed. Spark calls commit() only when it plans a next batch
        # with data, which never comes for the last batch of an availableNow run.
        self._committed(begin)
        filelog = self.filelog
        if self._target is None:
            filelog.discover()
        top = len(filelog) if self._target is None else self._target
        if begin >= top:
            return start
        if isinstance(limit, ReadAllAvailable):
            return self._offset(top)
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        max_bytes = self.opts.max_bytes_per_trigger
        if isinstance(limit, ReadMaxBytes):
            max_bytes = limit.max_bytes
        window = filelog.entries(begin, top)
        return self._offset(cap_end(window, begin, top, max_files, max_bytes))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return self._offset(len(self.filelog)) if self._log is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        entries = self.filelog.entries(self._index(start), self._index(end))
        return plan_partitions(entries, slots=packing.default_slots())

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.plan)

    def commit(self, end: dict[str, Any]) -> None:
        self._committed(self._index(end))

    def _committed(self, index: int) -> None:
        """Every batch up to ``index`` is committed: only now may source files be cleaned.

        The cleaned-up-to index is kept on disk only with cleanSource: it is what that needs
        across restarts, and its fsync'd write would otherwise be a cost of every batch."""
        committed_path = self.filelog.folder / "committed.json"
        if self._done is None:
            self._done = (
                json.loads(committed_path.read_text())["index"] if committed_path.exists() else 0
            )
        if index <= self._done:
            return
        if self.opts.clean_source != "OFF":
            clean_committed(self.filelog.entries(self._done, index), self.opts)
            write_json(committed_path, {"index": index})
        self._done = index
        _report_skipped(self.opts.require_schema_location())

    def spark_batch(
        self, spark: SparkSession, start: dict[str, Any], end: dict[str, Any]
    ) -> DataFrame | None:
        """The files of (start, end] parsed by Spark's reader, or by the Arrow reader in
        tasks when the stream was planned for it (``lakefeed.reader=arrow``)."""
        entries = self.filelog.entries(self._index(start), self._index(end))
        if not entries:
            return None
        if self.arrow is not None:
            if self._spark_files is None:
                self._spark_files = arrow_read.ArrowFiles(spark, self.plan, self.arrow)
            assert isinstance(self._spark_files, arrow_read.ArrowFiles)
            parts = plan_partitions(entries, slots=packing.default_slots())
            return self._spark_files.frame([part.entries for part in parts])
        if self._spark_files is None:
            self._spark_files = spark_read.SparkFiles(spark, self.plan)
        assert isinstance(self._spark_files, spark_read.SparkFiles)
        return self._spark_files.frame([e.path for e in entries])

    def stop(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def read_partition(partition: InputPartition, plan: ReadPlan) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, FilesPartition)
    from lakefeed.connectors.files.readers import read_entry  # tasks only: see plan.py

    for entry in partition.entries:
        yield from read_entry(entry, plan)


class CloudFilesBatchReader(DataSourceReader):
    """``spark.read.format("cloudFiles")``: every file present (a pipeline backfill), or with
    ``lakefeed.fileLogEnd=N`` the first N files of the stream's file log (what it committed).

    Records nothing in the file log: a batch read neither consumes nor adds files for the stream.
    """

    def __init__(self, opts: FileSourceOptions, plan: ReadPlan, log_end: int | None = None):
        self.opts = opts
        self.plan = plan
        self.log_end = log_end

    def partitions(self) -> Sequence[InputPartition]:
        if self.log_end is None:
            entries = list_files(self.opts.matcher)
        else:
            entries = committed_files(self.opts.require_schema_location(), self.log_end)
        return plan_partitions(entries, slots=packing.default_slots())

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.plan)


def _report_skipped(location: str) -> None:
    """Turn executors' skipped-file records into one WARN line each on the driver."""
    for details in _claim(location, "reported"):
        log.warning(
            "cloudFiles skipped an unreadable file",
            extra={"file": details["path"], "error": details["error"]},
        )


def _claim(location: str, reader: str) -> list[dict[str, Any]]:
    """Skipped-file records ``reader`` has not handled yet, each claimed by a marker file beside
    it (created exclusively), so every file is reported once per reader, across restarts."""
    claimed = []
    for record in storage.listing(skipped_dir(location), "*.json"):
        marker = record.with_name(record.name.removesuffix(".json") + f".{reader}")
        if storage.create_exclusive(str(marker), b""):
            claimed.append(json.loads(record.read_text()))
    return claimed


def claim_skipped(options: Mapping[str, str], reader: str) -> list[dict[str, Any]]:
    """Files the ``cloudFiles`` source with ``options`` skipped that ``reader`` (e.g. the
    runtime's event log) has not reported yet; the runtime emits them as events."""
    location = schema_location_of(options)
    return _claim(location, reader) if location else []


def skipped_files(schema_location: str) -> list[dict[str, Any]]:
    """Files a stream skipped (``ignoreCorruptFiles``/``ignoreMissingFiles``), with the reason.

    For the runtime, the UI and tests: Spark-free, read straight from the schema location.
    """
    return [
        json.loads(p.read_text()) for p in storage.listing(skipped_dir(schema_location), "*.json")
    ]


class CloudFilesDataSource(DataSource):
    """``spark.readStream.format("cloudFiles")``: Auto Loader-style incremental file ingestion."""

    def __init__(self, options: Any):
        super().__init__(options)
        self.opts = FileSourceOptions.parse(options)
        # Set by schema() (which Spark skips when the user passes .schema(...)); travels with
        # the pickled instance to streamReader().
        self.schema_origin = "user"

    @classmethod
    def name(cls) -> str:
        return "cloudFiles"

    def schema(self) -> StructType:
        location = self.opts.require_schema_location()
        if self.opts.schema_ddl:
            self.schema_origin = "option"
            data = parse_ddl(self.opts.schema_ddl)
        else:
            self.schema_origin = "inferred"
            data = apply_hints(_stored_or_inferred(location, self.opts), self.opts.schema_hints)
        rescue = self._rescue_column()
        return output_schema(data, rescue, self.opts.include_metadata)

    def _rescue_column(self) -> str | None:
        if self.schema_origin == "inferred":
            return self.opts.rescued_data_column or DEFAULT_RESCUE_COLUMN
        return self.opts.rescued_data_column

    def streamReader(self, schema: StructType, arrow: str | None = None) -> CloudFilesStreamReader:
        """The stream's reader; ``arrow``: the description of a planned stream whose batches
        the Arrow reader parses (see :mod:`~lakefeed.connectors.files.arrow_read`)."""
        if self.opts.clean_source == "MOVE":
            _check_move_destination(self.opts)
        return CloudFilesStreamReader(self.opts, self._plan(schema), arrow)

    def reader(self, schema: StructType) -> CloudFilesBatchReader:
        log_end = {k.lower(): v for k, v in self.options.items()}.get(LOG_END_OPTION.lower())
        return CloudFilesBatchReader(
            self.opts, self._plan(schema), None if log_end is None else int(log_end)
        )

    def _plan(self, schema: StructType) -> ReadPlan:
        rescue = self._rescue_column()
        if self.schema_origin == "user":
            rescue = _user_rescue_column(schema, rescue)
        extras = {rescue, METADATA_COLUMN}
        data = StructType([f for f in schema.fields if f.name not in extras])
        meta = next((f for f in schema.fields if f.name == METADATA_COLUMN), None)
        if meta is not None and meta.dataType != METADATA_TYPE:
            raise OptionError(
                f"column {METADATA_COLUMN} is reserved for file metadata of type "
                f"{METADATA_TYPE.simpleString()}; rename your column"
            )
        mode = self.opts.evolution_mode or (
            "addNewColumns" if self.schema_origin == "inferred" else "none"
        )
        if mode == "addNewColumns" and self.schema_origin != "inferred":
            raise OptionError(
                "cloudFiles.schemaEvolutionMode=addNewColumns needs an inferred schema (the "
                "stream's columns cannot change under a schema you fixed): drop the schema and use "
                "cloudFiles.schemaHints, or choose rescue, failOnNewColumns or none"
            )
        if mode == "rescue" and rescue is None:
            raise OptionError("schemaEvolutionMode=rescue needs a rescued-data column")
        return ReadPlan(
            opts=self.opts,
            data_schema=data,
            evolution_mode=mode,
            rescue_column=rescue,
            include_metadata=meta is not None,
            schema_location=self.opts.require_schema_location(),
        )


def planned_stream(
    spark: SparkSession, options: Mapping[str, str], fixed: StructType | str | None = None
) -> DataFrame | None:
    """``readStream.format("cloudFiles")`` read by Spark's own reader unless the stream needs
    lakefeed's (see :func:`spark_read.choose`); None: lakefeed's Python reader. ``fixed`` is a
    schema the user gave with ``.schema()``: then, as Spark does, the source infers nothing."""
    available = bridge.available(spark)
    early = spark_read.ahead(options, available, available and spark_read.reaches(spark, options))
    if early is not None:
        _chosen(options, early)
        return None
    source = CloudFilesDataSource(options)
    if fixed is None:
        schema = source.schema()
    else:
        schema = fixed if isinstance(fixed, StructType) else parse_ddl(fixed)
    reader = source.streamReader(schema)
    choice = spark_read.choose(reader.plan, options)
    reason = spark_read.refusal(reader.plan)
    if choice.reader == "spark" and reason is not None:
        raise OptionError(
            f"{bridge.READER_OPTION}=spark cannot read this cloudFiles stream: {reason} "
            f"(or drop {bridge.READER_OPTION} to keep lakefeed's reader)"
        )
    _chosen(options, choice)
    if choice.reader == "python":
        return None
    description = f"CloudFilesSource[{source.opts.path}]"
    arrow = description if choice.reader == "arrow" else None
    return bridge.planned_stream(
        spark, lambda: source.streamReader(schema, arrow), schema, description=description
    )


_choices: dict[str, spark_read.ReaderChoice] = {}
"""The reader each stream of this process was given, by schema location (one per stream)."""


def _chosen(options: Mapping[str, str], choice: spark_read.ReaderChoice) -> None:
    location = schema_location_of(options)
    if location:
        _choices[location] = choice
    log.info(
        "cloudFiles reader chosen",
        extra={"path": options.get("path"), "reader": choice.reader, "why": choice.why},
    )


def reader_choice(options: Mapping[str, str]) -> spark_read.ReaderChoice | None:
    """Which reader parses the files of the stream with ``options`` and why (None: no stream
    with them was made in this process yet): for the flow's ``flow_start`` event."""
    location = schema_location_of(options)
    return _choices.get(location) if location else None


def _user_rescue_column(schema: StructType, wanted: str | None) -> str | None:
    names = set(schema.names)
    if wanted is not None and wanted not in names:
        raise OptionError(
            f"rescuedDataColumn={wanted} is not in the schema you gave: add "
            f"`{wanted} STRING` to it (or use lakefeed.read_files(schema=...), which adds it)"
        )
    if wanted is None and DEFAULT_RESCUE_COLUMN in names:
        return DEFAULT_RESCUE_COLUMN
    return wanted


def _stored_or_inferred(location: str, opts: FileSourceOptions) -> StructType:
    """The newest schema version at ``location``; version 0 is inferred from a sample."""
    store = SchemaStore(location)
    latest = store.latest()
    if latest is not None:
        return latest[1]
    sample = [entry.path for entry in list_files(opts.matcher)[: opts.sample_files]]
    if not sample:
        missing = (
            "" if storage.is_dir(opts.matcher.base) else f" ({opts.matcher.base} does not exist)"
        )
        raise OptionError(
            f"no {opts.format} files under {opts.path}{missing} to infer a schema from",
            fix="land a first file, or give a schema (.schema(...) or cloudFiles.schemaHints "
            "with all columns)",
        )
    inferred = infer_schema(sample, opts)
    store.create(0, inferred, f"inferred from {len(sample)} file(s)")
    latest = store.latest()
    assert latest is not None
    log.info(
        "cloudFiles inferred a schema",
        extra={"schema_location": location, "columns": latest[1].names, "files": len(sample)},
    )
    return latest[1]


def _check_move_destination(opts: FileSourceOptions) -> None:
    source = opts.matcher.base
    target = opts.move_destination or ""
    if storage.is_object_store(source) != storage.is_object_store(target):
        raise OptionError(
            f"cloudFiles.cleanSource.moveDestination {target} and the source folder {source} "
            "must be on the same storage (both local or both object storage): a move between "
            "them would be a copy lakefeed does not make"
        )
    if target == source or target.startswith(source.rstrip("/") + "/"):
        raise OptionError(
            "cloudFiles.cleanSource.moveDestination must not be inside the source folder "
            f"({target} is under {source}): archived files would be discovered again"
        )
