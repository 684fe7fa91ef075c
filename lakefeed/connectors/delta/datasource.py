"""The ``delta`` format for Spark: thin adapters from Spark's Python Data Source API onto the
Spark-free core (log, offsets, files, commit, pruning).

Driver side: schema, planning, offsets and commits. Executor side: Arrow reads and writes of
Parquet files. Nothing here keeps state Spark does not hand back, except caches.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lakefeed.connectors import packing
from lakefeed.connectors.delta import offsets
from lakefeed.core import storage
from lakefeed.delta import (
    alter,
    changes,
    commit,
    constraints,
    features,
    generated,
    identity,
    log,
    post_commit,
    pruning,
    replay,
    spark_read,
)
from lakefeed.delta.errors import OTHER_TABLE
from lakefeed.delta.files import (
    WrittenFile,
    read_file,
    remove_files,
    stream_file_prefix,
    write_batches,
)
from lakefeed.delta.log import DataFile
from lakefeed.delta.mapping import ColumnMapping
from lakefeed.delta.options import (
    CHECKPOINT_NEEDED,
    DeltaOptionError,
    delta_options,
    partition_columns,
    query_id,
    register_settings,
    time_travel_version,
    txn_option,
)
from lakefeed.delta.schema import merge_schema, table_arrow_schema
from lakefeed.delta.snapshot import Snapshot, for_stream
from lakefeed.delta.spark_read import spark_schema
from lakefeed.spark import offset_log
from lakefeed.spark.jvm import bridge
from lakefeed.spark.jvm.bridge import READER_OPTION

DEFAULT_MAX_FILES = 1000


class DeltaDataSource(DataSource):
    """``format("delta")``: batch and streaming reads and writes of Delta tables."""

    @classmethod
    def name(cls) -> str:
        return "delta"

    def schema(self) -> StructType:
        root = register_settings(self.options)
        if changes.requested(self.options):
            return changes.spark_schema(root)
        return spark_schema(log.open_table(root, time_travel_version(root, self.options)))

    def reader(self, schema: StructType) -> DataSourceReader:
        if changes.requested(self.options):
            return changes.ChangeFeedBatchReader(self.options, schema)
        return DeltaBatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if changes.requested(self.options):
            return changes.ChangeFeedStreamReader(self.options, schema)
        return DeltaStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        spec = write_spec(self.options, schema, overwrite)
        generated.refuse_python_sink(spec.computed, spec.root)
        return DeltaBatchWriter(spec, schema, self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        app_id = query_id(self.options)
        snapshot = for_stream(register_settings(self.options), app_id)  # before it opens
        spec = write_spec(self.options, schema, overwrite, "STREAMING UPDATE", snapshot)
        generated.refuse_python_sink(spec.computed, spec.root)
        checkpoint = str(delta_options(self.options).get("checkpointLocation"))
        return DeltaStreamWriter(spec, schema, app_id, checkpoint)


# ---------------------------------------------------------------- writing


def write_spec(
    options: Mapping[str, str],
    schema: StructType,
    overwrite: bool,
    operation: str = "WRITE",
    snapshot: Snapshot | None = None,
) -> commit.WriteSpec:
    """Everything about a write decided (and refused) on the driver before a task runs, from
    one look at the table (``snapshot``: a stream's open table, as its last batch left it: the
    commit checks the schema again against the newest version; else opened here)."""
    root, opts = register_settings(options), delta_options(options)
    arrow = to_arrow_schema(schema, timezone="UTC")
    table = (snapshot or Snapshot(root)).current()
    partitions = commit.resolve_partitioning(root, partition_columns(options), table)
    # The generated columns the data lacks are computed before any file is written; an
    # overwriteSchema write replaces the schema with the data's, generation included (Delta).
    replaced = overwrite and opts.flag("overwriteSchema")
    computed = generated.expressions(None if table is None or replaced else table.schema())
    checks = (
        constraints.of_table(table.metadata().configuration, table.schema())
        if table is not None and not replaced
        else ()
    )
    identities = _identities(table, arrow.names, root) if not replaced else ()
    if identities and table is not None:
        lacking = [table_arrow_schema(table.schema()).field(c.name) for c in identities]
        arrow = pa.schema([*arrow, *lacking])
    if computed and table is not None:
        arrow = generated.completed(arrow, table_arrow_schema(table.schema()), computed, root)
    commit.check_partition_columns(arrow, partitions, root)
    spec = commit.WriteSpec(
        root=root,
        mode="overwrite" if overwrite else "append",
        partition_by=partitions,
        merge_schema=opts.flag("mergeSchema"),
        overwrite_schema=opts.flag("overwriteSchema"),
        operation=operation,
        generated=computed,
        identities=identities,
        checks=checks,
        user_metadata=opts.get("userMetadata"),
        source_offsets=opts.get(replay.OFFSETS),
    )
    if table is not None:
        features.check_writable(table, root, operation, own_commit=True)
    if table is not None and not spec.overwrite_schema:
        # Refuse a bad schema now, not after every task has written its files. The writer
        # knows nothing of deleted rows (appends and overwrites leave them to delta-rs); it writes
        # physical names under column mapping.
        log.check_readable(table, root, features.WRITES_KEEP, "lakefeed's Delta writer")
        current = table_arrow_schema(table.schema())
        merge_schema(current, arrow, merge=spec.merge_schema, path=root)
        commit.check_required_columns(current, arrow, root)
    if table is not None:
        mapped = alter.for_write(table, arrow, spec.merge_schema, spec.overwrite_schema, root)
        spec = replace(spec, **mapped)
    return spec


def _identities(
    table: DeltaTable | None, given: list[str], root: str
) -> tuple[identity.Identity, ...]:
    """The identity columns whose values the write generates (:mod:`lakefeed.delta.identity`):
    those of a table with the ``identityColumns`` feature that the rows lack."""
    if table is None or "identityColumns" not in features.writer_features(table):
        return ()
    return identity.to_generate(identity.of_schema(table.schema()), given, root)


def check_stream_write(
    options: Mapping[str, str], schema: StructType, complete: bool
) -> commit.WriteSpec:
    """What the first micro-batch would refuse, refused before the query starts instead."""
    if not delta_options(options).get("checkpointLocation"):
        raise DeltaOptionError(CHECKPOINT_NEEDED)
    return write_spec(options, schema, complete, operation="STREAMING UPDATE")


@dataclass
class DeltaCommitMessage(WriterCommitMessage):
    files: list[WrittenFile] = field(default_factory=list)


def _task_ids() -> tuple[int, int | None]:
    context = TaskContext.get()
    if context is None:
        return 0, None
    batch = context.getLocalProperty("streaming.sql.batchId")
    return context.partitionId(), (int(batch) if batch is not None else None)


def _checked(batches: Iterator[pa.RecordBatch], spec: commit.WriteSpec) -> Iterator[pa.RecordBatch]:
    """The task's batches, each checked against the table's constraints before it is written
    (a violation fails the task, whose files :func:`write_batches` then removes)."""
    for batch in batches:
        constraints.check_arrow(batch, spec.checks, spec.root)
        yield spec.physical(batch)


def _collect(messages: Sequence[WriterCommitMessage | None]) -> list[WrittenFile]:
    return [f for m in messages if isinstance(m, DeltaCommitMessage) for f in m.files]


def _cleanup(messages: Sequence[WriterCommitMessage | None], root: str) -> None:
    """Spark's abort, also after a commit that raised: the log decides what may go."""
    post_commit.remove_unless_committed(root, _collect(messages))


class DeltaBatchWriter(storage.CarriesSettings, DataSourceArrowWriter):
    def __init__(self, spec: commit.WriteSpec, schema: StructType, options: Mapping[str, str]):
        self.carry(spec.root)
        self.spec = spec
        self.schema = schema
        self.txn = txn_option(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaCommitMessage:
        partition, _ = _task_ids()
        prefix = f"part-{partition:05d}-"
        return DeltaCommitMessage(
            write_batches(
                self.spec.root, _checked(iterator, self.spec), self.spec.file_partition_by, prefix
            )
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        result = commit.commit_files(
            self.spec,
            _collect(messages),
            to_arrow_schema(self.schema, timezone="UTC"),
            txn=self.txn,
        )
        if result.skipped:  # another writer committed the same txn: these files are not in
            remove_files(self.spec.root, _collect(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _cleanup(messages, self.spec.root)


class DeltaStreamWriter(storage.CarriesSettings, DataSourceStreamArrowWriter):
    def __init__(
        self, spec: commit.WriteSpec, schema: StructType, app_id: str, checkpoint: str
    ) -> None:
        self.carry(spec.root)
        self.spec = spec
        self.schema = schema
        self.app_id = app_id
        self.checkpoint = checkpoint

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeltaCommitMessage:
        partition, batch = _task_ids()
        prefix = stream_file_prefix(self.app_id, batch or 0) + f"{partition:05d}-"
        return DeltaCommitMessage(
            write_batches(
                self.spec.root, _checked(iterator, self.spec), self.spec.file_partition_by, prefix
            )
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        fingerprint = offset_log.fingerprint(self.checkpoint, batchId)
        commit.commit_stream_batch(
            replace(self.spec, source_offsets=fingerprint),
            _collect(messages),
            to_arrow_schema(self.schema, timezone="UTC"),
            self.app_id,
            batchId,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _cleanup(messages, self.spec.root)


# ---------------------------------------------------------------- reading


@dataclass
class FilesPartition(InputPartition):
    files: list[DataFile]

    def __init__(self, files: list[DataFile]) -> None:
        super().__init__(len(files))
        self.files = files


def split_files(files: Sequence[DataFile]) -> list[FilesPartition]:
    """Files into tasks like Spark's file sources (:mod:`lakefeed.connectors.packing`)."""
    tasks = packing.pack(files, lambda f: f.size, packing.default_slots())
    return [FilesPartition(task) for task in tasks]


def _read_partition(
    root: str, schema: StructType, partition: InputPartition, columns: ColumnMapping
) -> Iterator[pa.RecordBatch]:
    target = to_arrow_schema(schema, timezone="UTC")
    # A table without files plans no partition; pyspark then reads one stand-in partition.
    files = partition.files if isinstance(partition, FilesPartition) else []
    for file in files:
        yield from read_file(root, file, target, columns)


_FILTER_OPS: dict[type, str] = {
    EqualTo: "=",
    EqualNullSafe: "<=>",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "in",
    IsNull: "isnull",
    IsNotNull: "isnotnull",
}


def _predicate(item: Filter) -> pruning.Predicate | None:
    op = _FILTER_OPS.get(type(item))
    attribute: tuple[str, ...] = tuple(getattr(item, "attribute", ()))
    if op is None or len(attribute) != 1:
        return None
    value: Any = getattr(item, "value", None)
    if op == "in":
        value = tuple(value)
    return (op, attribute[0], value)


class DeltaBatchReader(storage.CarriesSettings, DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.root = register_settings(options)
        self.carry(self.root)
        self.version = time_travel_version(self.root, options)
        self.schema = schema
        self.columns = log.table_mapping(log.open_table(self.root, self.version))
        self.predicates: list[pruning.Predicate] = []

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        # Filters only prune files here; Spark still evaluates every one of them on the rows.
        for item in filters:
            predicate = _predicate(item)
            if predicate is not None:
                self.predicates.append(predicate)
            yield item

    def partitions(self) -> Sequence[InputPartition]:
        table = log.open_table(self.root, self.version)
        return split_files(pruning.table_files(table, self.root, self.predicates))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.root, self.schema, partition, self.columns)


class DeltaStreamReader(
    storage.CarriesSettings, DataSourceStreamReader, SupportsTriggerAvailableNow
):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.root = register_settings(options)
        self.carry(self.root)
        self.schema = schema
        opts = delta_options(options)
        self.starting_version = opts.get("startingVersion")
        self.starting_timestamp = opts.get("startingTimestamp")
        max_bytes = opts.byte_size("maxBytesPerTrigger")
        max_files = opts.positive_int("maxFilesPerTrigger")
        self.feed_options = offsets.FeedOptions(
            ignore_deletes=opts.flag("ignoreDeletes"),
            ignore_changes=opts.flag("ignoreChanges"),
            skip_change_commits=opts.flag("skipChangeCommits"),
            max_files=max_files if max_files or max_bytes else DEFAULT_MAX_FILES,
            max_bytes=max_bytes,
        )
        # Refuse what cannot work before the first batch.
        table = log.open_table(self.root)
        self.table_id = str(table.metadata().id)
        self.columns = log.table_mapping(table)
        offsets.initial_offset(self.root, self.starting_version, self.starting_timestamp)
        self.available_now: int | None = None
        self._latest_seen: int | None = None
        self._feed: offsets.ChangeFeed | None = None

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_feed"] = None  # executors need no log cache
        return state

    @property
    def feed(self) -> offsets.ChangeFeed:
        if self._feed is None:
            read_schema = to_arrow_schema(self.schema, timezone="UTC")
            self._feed = offsets.ChangeFeed(self.root, self.feed_options, read_schema, self.columns)
        return self._feed

    def initialOffset(self) -> dict:
        start = offsets.initial_offset(self.root, self.starting_version, self.starting_timestamp)
        return start.to_dict(self.table_id)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.feed_options.max_bytes is not None and self.feed_options.max_files is None:
            return ReadMaxBytes(self.feed_options.max_bytes)
        return ReadMaxFiles(self.feed_options.max_files or DEFAULT_MAX_FILES)

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = log.latest_version(self.root)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._latest_seen = log.latest_version(self.root)
        latest = self.available_now if self.available_now is not None else self._latest_seen
        begin = self._resumed(start)
        end = self.feed.latest_offset(begin, latest, not isinstance(limit, ReadAllAvailable))
        return end.to_dict(self.table_id)

    def _resumed(self, start: dict) -> offsets.DeltaOffset:
        """``start`` as an offset of this table: offsets of another table (the query now reads
        another path, or the table was replaced) would skip or repeat rows, as Delta refuses."""
        recorded = start.get("reservoirId")
        if recorded is not None and str(recorded) != self.table_id:
            raise log.DeltaSourceError(
                f"the stream's checkpoint holds offsets of Delta table {recorded}, but "
                f"{self.root} is table {self.table_id} (the query now reads another table, or "
                "this one was deleted and created again)",
                fix="rebuild the reading table with `--full-refresh`, or give the query a new "
                "checkpoint (in plain Spark: a new checkpointLocation)",
                code=OTHER_TABLE,
            )
        return offsets.DeltaOffset.from_dict(start)

    def reportLatestOffset(self) -> dict | None:
        """Everything committed so far (the table version ``latestOffset`` just listed), so a
        query's progress shows how far behind the table it is."""
        if self._latest_seen is None:
            return None
        return offsets.DeltaOffset(self._latest_seen + 1, -1, False).to_dict(self.table_id)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        files = self.feed.files_between(
            offsets.DeltaOffset.from_dict(start), offsets.DeltaOffset.from_dict(end)
        )
        return split_files(files)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read_partition(self.root, self.schema, partition, self.columns)

    def spark_batch(self, spark: SparkSession, start: dict, end: dict) -> DataFrame | None:
        """The same batch as :meth:`partitions` plans, read by Spark's Parquet reader."""
        files = self.feed.files_between(
            offsets.DeltaOffset.from_dict(start), offsets.DeltaOffset.from_dict(end)
        )
        return spark_read.files_frame(spark, self.root, files, self.schema, self.columns)

    def commit(self, end: dict) -> None:
        self.feed.forget_before(offsets.DeltaOffset.from_dict(end).version)


MAX_SCAN_GROUPS = 64
"""Partition-value groups up to which a batch read is one Parquet scan per group; beyond, the
Python reader (which also skips files by their statistics) keeps the plan small."""


def planned_read(
    spark: SparkSession, options: Mapping[str, str], schema: Any = None
) -> DataFrame | None:
    """``read.format("delta")`` as Spark's Parquet reader over a snapshot's files (None: the
    Python data source). A time-travel read is fixed to its version. A read of the latest
    version lists the table's files whenever a query reading it is planned, as Delta's static
    reads do: the static side of a stream–static join reads the latest version in every
    micro-batch (the Python data source, too, plans per query)."""
    if changes.requested(options):
        changes.check(options)
        return None  # the Python data source reads change rows (see changes.py)
    if schema is not None or delta_options(options).get("path") is None:
        return None
    if bridge.reader_choice(options, default="spark") != "spark":
        return None
    root = register_settings(options)
    version = time_travel_version(root, options)
    table = log.open_table(root, version)
    if version is not None:
        return snapshot_frame(spark, root, table, spark_schema(table))
    if not bridge.available(spark) or len(_scan_groups(_files(table, root))) > MAX_SCAN_GROUPS:
        return None
    schema = spark_schema(table)
    opener = functools.partial(latest_frame, root, schema)
    return bridge.planned_read(spark, opener, schema, description=f"DeltaTable[{root}]")


def _files(table: DeltaTable, root: str) -> list[DataFile]:
    return pruning.table_files(table, root)


def _scan_groups(files: Sequence[DataFile]) -> set[tuple[tuple[str, str | None], ...]]:
    return {tuple(sorted(f.partition_values.items())) for f in files}


def snapshot_frame(
    spark: SparkSession, root: str, table: DeltaTable, schema: StructType
) -> DataFrame | None:
    """The snapshot's rows as Spark's Parquet scans; None beyond :data:`MAX_SCAN_GROUPS`."""
    files = _files(table, root)
    if len(_scan_groups(files)) > MAX_SCAN_GROUPS:
        return None
    frame = spark_read.files_frame(spark, root, files, schema, log.table_mapping(table))
    return frame if frame is not None else spark.createDataFrame([], schema)


def latest_frame(root: str, schema: StructType, spark: SparkSession) -> DataFrame:
    """The table's latest version in ``schema`` (the one the DataFrame was made with)."""
    frame = snapshot_frame(spark, root, log.open_table(root), schema)
    if frame is None:  # grown past MAX_SCAN_GROUPS since: the Python reader
        frame = spark.read.format("delta").option(READER_OPTION, "python").load(root)
    return frame.select(*[F.col(f"`{f.name}`") for f in schema.fields])


def planned_stream(
    spark: SparkSession, options: Mapping[str, str], schema: Any = None
) -> DataFrame | None:
    """``readStream.format("delta")`` with rows read by Spark (None: use the Python source,
    also for a schema the user fixed: the table's own is what a planned stream reads)."""
    if schema is not None or changes.requested(options):
        return None
    if not bridge.spark_reads(spark, options, default="spark"):
        return None
    schema = DeltaDataSource(dict(options)).schema()
    reader = DeltaStreamReader(options, schema)  # refuses bad options and tables before a query
    return bridge.planned_stream(
        spark,
        lambda: DeltaStreamReader(options, schema),
        schema,
        description=f"DeltaSource[{reader.root}]",
    )
