"""Writes to Delta whose data files Spark's own (JVM) Parquet writer produces.

A Python Data Source sink receives every row as Arrow in a Python worker before anything is
written; measured, that hand-over alone costs more than Spark's whole Parquet write
(docs/benchmarks.md). So a stream into Delta runs as ``foreachBatch``: Spark's tasks write the
batch's files in place, under the batch's stream file names (lakefeed's commit protocol,
``DirectCommitProtocol``, as delta-spark's ``DelayedCommitProtocol``: no staging, no rename,
which on S3 would be a copy per file), the driver reads the footers for statistics and commits
the files with the same ``txn`` action as the Python sink. Where that protocol cannot be used
Spark writes into a staging folder inside the table and the driver moves the files in.
Exactly-once is unchanged: a replayed batch finds its txn and writes nothing; files written
but never committed carry their batch's name and go when that batch commits at the first
batch of the query's next run, as does a staging folder left by a killed driver. A batch
``save()`` takes the same path as one commit (with its optional ``txnAppId``/``txnVersion``);
what a killed driver left of it goes with ``vacuum``.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lakefeed.core import storage
from lakefeed.delta import commit, constraints, generated, identity, mapping, post_commit
from lakefeed.delta.files import (
    NULL_PARTITION,
    STAGING,
    WrittenFile,
    app_tag,
    escape_path_name,
    now_ms,
    parse_partition_value,
    partition_string,
    remove_files,
    stream_file_prefix,
)
from lakefeed.delta.options import query_id
from lakefeed.delta.snapshot import Snapshot, for_stream
from lakefeed.delta.stats import footer_stats
from lakefeed.spark import offset_log
from lakefeed.spark.jvm import loadable

TIMESTAMP_CONF = "spark.sql.parquet.outputTimestampType"
TIMESTAMP_MICROS = "TIMESTAMP_MICROS"
"""What Delta readers expect; set for the whole session by ``lakefeed.spark_session()``."""
WRITER_OPTION = "lakefeed.writer"
"""``spark``: Spark writes the data files; ``python``: the Python Data Source sink. Default:
:func:`default_writer`."""
BATCH_TAG = "write"
"""Staging folders of batch writes; a stream's carry its query's app tag."""
PROTOCOL_CONF = "spark.sql.sources.commitProtocolClass"
SPARK_PROTOCOL = "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol"
DIRECT_PROTOCOL = "dev.lakefeed.spark.DirectCommitProtocol"
"""lakefeed's protocol (``lakefeed/spark/jvm/java``): Delta data files written in place."""
DIRECT_TOKEN = "lakefeed.direct.token"
DIRECT_PREFIX = "lakefeed.direct.prefix"
"""Write options that mark a write for ``DirectCommitProtocol`` (its ``TOKEN``, ``PREFIX``)."""
RAW_LOCAL = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}
"""Hadoop settings of an in-place write to local disk: no ``.crc`` file beside each data file
(Hadoop's checksummed local file system writes one; Delta readers never read it)."""
FOOTER_READERS = 8
"""Data files whose footers the driver reads at once (round trips on object storage)."""


def default_writer(root: str, in_place: bool) -> str:
    """``spark`` unless the table is on object storage and Spark would stage its files.

    ``in_place``: the session writes Delta files where they stay (:func:`in_place`), as on S3
    it must: Spark's staged write goes through S3A's ``FileOutputCommitter``, whose task and job
    commits rename every file (a copy and a delete each on S3, with listings around them), and
    lakefeed then moved each file into the table (one more copy). Without it (Spark Connect, a
    session with other committers) the Python writer, which puts each file at its final key
    once, is the faster one on S3 (docs/benchmarks.md, "Deployment").
    """
    return "spark" if in_place or not storage.is_object_store(root) else "python"


def applies(
    schema: StructType,
    partition_by: list[str],
    session_time_zone: str,
    timestamp_type: str = TIMESTAMP_MICROS,
) -> bool:
    """Whether Spark's writer lays files out exactly as Delta expects.

    Spark names timestamp partition folders in the session time zone, Delta's partition values
    are UTC: such tables keep the Python sink unless the session is in UTC. Delta readers
    expect INT64 timestamps (delta-spark writes them): a session whose
    ``spark.sql.parquet.outputTimestampType`` (``timestamp_type``) is still Spark's INT96 keeps
    the Python sink for tables with timestamps (``lakefeed.spark_session()`` sets it).
    """
    types = [f.dataType for f in schema.fields]
    if timestamp_type.upper() == "INT96" and any(_has_timestamp(t) for t in types):
        return False
    if session_time_zone.upper() in ("UTC", "Z", "GMT", "ETC/UTC"):
        return True
    by_name = {f.name: f.dataType for f in schema.fields}
    return not any(isinstance(by_name.get(c), TimestampType) for c in partition_by)


def _has_timestamp(dtype: DataType) -> bool:
    if isinstance(dtype, TimestampType | TimestampNTZType):
        return True
    if isinstance(dtype, StructType):
        return any(_has_timestamp(f.dataType) for f in dtype.fields)
    if isinstance(dtype, ArrayType):
        return _has_timestamp(dtype.elementType)
    if isinstance(dtype, MapType):
        return _has_timestamp(dtype.keyType) or _has_timestamp(dtype.valueType)
    return False


class SparkFilesSink:
    """The ``foreachBatch`` body of ``writeStream.format("delta")``.

    What only a new run of the query needs is done at its first batch: reading the query id,
    dropping what a killed driver left in staging and looking for files an earlier attempt of
    the batch adopted (a batch of this run that fails fails the query; its restart makes a new
    sink). The table stays open across batches
    (:func:`~lakefeed.delta.snapshot.for_stream`).
    """

    def __init__(self, spec: commit.WriteSpec, checkpoint: str) -> None:
        self.spec = spec
        self.checkpoint = checkpoint
        self.app_id: str | None = None

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        first = self.app_id is None
        app_id = self.app_id or self._first_batch()
        spec = replace(self.spec, source_offsets=offset_log.fingerprint(self.checkpoint, batch_id))
        snapshot = for_stream(spec.root, app_id)
        if _committed(snapshot, (app_id, batch_id), spec):
            # A replay after a crash between the Delta commit and Spark's commit log: nothing to
            # write, but files an earlier attempt adopted and never committed go now (the
            # commit skips on its txn, then removes them).
            schema = to_arrow_schema(frame.schema, timezone="UTC")
            commit.commit_stream_batch(spec, [], schema, app_id, batch_id, refresh=False)
            return
        prefix = stream_file_prefix(app_id, batch_id)
        spec = _with_checks(spec, snapshot)
        files, schema = _write(frame, spec, app_tag(app_id), prefix)
        # The replay check above brought the table up to date: the commit goes against that
        # version (delta-rs checks whatever was committed since) without a second listing.
        commit.commit_stream_batch(
            spec, files, schema, app_id, batch_id, sweep=first, refresh=False
        )

    def _first_batch(self) -> str:
        app_id = query_id({"checkpointLocation": self.checkpoint})
        _drop_staging(self.spec.root, app_tag(app_id) + "-")
        self.app_id = app_id
        return app_id


def _with_checks(spec: commit.WriteSpec, snapshot: Snapshot) -> commit.WriteSpec:
    """``spec`` with the CHECK constraints and identity high water marks the table has now (a
    stream's spec was made at its start; a constraint added since holds from the next batch
    on, as in delta-spark; each batch generates identity values after the last batch's)."""
    table = snapshot.current()
    if table is None:
        return spec
    checks = constraints.of_table(table.metadata().configuration, table.schema())
    now = {column.name: column for column in identity.of_schema(table.schema())}
    identities = tuple(now.get(column.name, column) for column in spec.identities)
    return dataclasses.replace(spec, checks=checks, identities=identities)


def write_batch(
    frame: DataFrame,
    spec: commit.WriteSpec,
    txn: tuple[str, int] | None,
    snapshot: Snapshot | None = None,
) -> None:
    """``df.write.format("delta").save()``: Spark writes the files, one Delta commit adds them.

    A failed write or commit leaves nothing behind (its staged and adopted files are removed);
    a staging folder of a killed driver is removed by ``lakefeed table vacuum``. ``snapshot``:
    the table as the write's checks opened it (one log load per write).
    """
    snapshot = snapshot or Snapshot(spec.root)
    if txn is not None and _committed(snapshot, txn, spec):
        return  # the idempotent write (txnAppId/txnVersion) is already in the table
    files: list[WrittenFile] = []
    try:
        files, schema = _write(frame, spec, BATCH_TAG, f"part-{uuid.uuid4().hex[:8]}-")
        result = commit.commit_files(spec, files, schema, txn=txn, snapshot=snapshot)
        if result.skipped:
            remove_files(spec.root, files)  # another writer committed the same txn meanwhile
    except BaseException:
        post_commit.remove_unless_committed(spec.root, files)
        raise


def _write(
    frame: DataFrame, spec: commit.WriteSpec, tag: str, prefix: str
) -> tuple[list[WrittenFile], pa.Schema]:
    """Spark writes ``frame`` into the table as files named ``prefix…``, not yet committed:
    in place when the session runs lakefeed's commit protocol, else through a staging folder
    (``tag``: whose) from which lakefeed moves them. The table's identity columns the rows
    lack get values (:func:`with_identity`), its generated columns are computed or checked
    (:mod:`~lakefeed.delta.generated`), and its CHECK constraints checked
    (:mod:`~lakefeed.delta.constraints`)."""
    frame = generated.apply(with_identity(frame, spec.identities), spec.generated)
    frame = constraints.apply(frame, spec.checks)
    try:
        return _write_files(frame, spec, tag, prefix)
    except Exception as exc:
        coded = generated.violation(exc, spec.root) or constraints.violation(exc, spec.root)
        if coded is None:
            raise
        raise coded from None


def with_identity(frame: DataFrame, identities: Sequence[identity.Identity]) -> DataFrame:
    """``frame`` with values for the identity columns ``identities`` (:mod:`.identity`): per
    row ``base + step * monotonically_increasing_id()``, unique across the write's Spark
    partitions (each partition's ids start at its index shifted by 33 bits), as delta-spark's
    generator keeps its partitions' values apart."""
    for column in identities:
        row = F.monotonically_increasing_id()
        frame = frame.withColumn(column.name, F.lit(column.base) + F.lit(column.step) * row)
    return frame


def _write_files(
    frame: DataFrame, spec: commit.WriteSpec, tag: str, prefix: str
) -> tuple[list[WrittenFile], pa.Schema]:
    schema = to_arrow_schema(frame.schema, timezone="UTC")
    frame = _physical(frame, spec)
    files = to_arrow_schema(frame.schema, timezone="UTC")  # as files and the log name columns
    if in_place(frame.sparkSession):
        return _write_in_place(frame, spec, prefix, files), schema
    staging = _staging_folder(spec.root, tag)
    try:
        _writer(frame, spec, "overwrite").parquet(staging)
        adopted = [
            _adopt(spec.root, path, folders, files, prefix) for path, folders in _staged(staging)
        ]
    finally:
        storage.remove_tree(staging)
    return [f for f in adopted if f is not None], schema


def _physical(frame: DataFrame, spec: commit.WriteSpec) -> DataFrame:
    """``frame`` under the physical names of a column-mapped table, with the Parquet field ids
    Spark's writer stores (``parquet.field.id``), nested fields too: a cast renames structs'
    fields by position."""
    if spec.columns is None or not spec.columns.active:
        return frame
    target = StructType.fromJson(
        mapping.physical_json(frame.schema.jsonValue(), spec.columns.columns)
    )
    return frame.select(
        *(
            F.col(f"`{name}`").cast(field.dataType).alias(field.name, metadata=field.metadata)
            for name, field in zip(frame.columns, target.fields, strict=True)
        )
    )


def _writer(frame: DataFrame, spec: commit.WriteSpec, mode: str) -> DataFrameWriter:
    # Hadoop settings given for the table (fs.s3a.*) reach S3A as Spark's per-write options.
    writer = frame.write.mode(mode).options(**storage.given(spec.root))
    writer = writer.option("compression", "snappy")
    return writer.partitionBy(*spec.file_partition_by) if spec.partition_by else writer


def in_place(spark: SparkSession) -> bool:
    """Whether Spark writes this session's Delta files in place (``DirectCommitProtocol``).

    The protocol is the session's ``spark.sql.sources.commitProtocolClass`` (Spark instantiates
    it per write); it passes every write but lakefeed's to Spark's own protocol, so it is set
    on a session still using Spark's default. A session with another protocol (e.g. S3A's
    committers), without lakefeed's jar or without a JVM (Spark Connect) keeps the staged write.
    """
    current = spark.conf.get(PROTOCOL_CONF, SPARK_PROTOCOL)
    if current == DIRECT_PROTOCOL:
        return True
    if current != SPARK_PROTOCOL or not loadable(spark, DIRECT_PROTOCOL):
        return False
    spark.conf.set(PROTOCOL_CONF, DIRECT_PROTOCOL)
    return True


def _write_in_place(
    frame: DataFrame, spec: commit.WriteSpec, prefix: str, schema: pa.Schema
) -> list[WrittenFile]:
    """Spark's tasks write their files at their final keys; the driver reads their footers."""
    token = uuid.uuid4().hex
    writer = _writer(frame, spec, "append").option(DIRECT_TOKEN, token)
    if not storage.is_object_store(spec.root):
        writer = writer.options(**RAW_LOCAL)
    writer.option(DIRECT_PREFIX, prefix).parquet(spec.root)
    protocol = frame.sparkSession._jvm.dev.lakefeed.spark.DirectCommitProtocol  # type: ignore[union-attr]
    written: list[str] = json.loads(protocol.take(token))
    try:
        with ThreadPoolExecutor(max_workers=FOOTER_READERS) as pool:
            found = list(pool.map(lambda rel: _described(spec.root, rel, schema), written))
    except BaseException:
        for relative in written:
            storage.remove(storage.join(spec.root, relative))
        raise
    return [f for f in found if f is not None]


def _staging_folder(root: str, tag: str) -> str:
    return storage.join(root, STAGING, f"{tag}-{uuid.uuid4().hex}")


def _committed(snapshot: Snapshot, txn: tuple[str, int], spec: commit.WriteSpec) -> bool:
    """Whether the table's newest version holds ``txn``: a replay writes nothing (a checkpoint
    behind its table is refused here, before any file is written)."""
    snapshot.latest()
    return snapshot.committed(txn, spec.source_offsets)


def _drop_staging(root: str, prefix: str) -> None:
    """Remove what an earlier attempt of this query left in staging (never others')."""
    folder = storage.join(root, STAGING)
    for name in storage.list_names(folder):
        if name.startswith(prefix):
            storage.remove_tree(storage.join(folder, name))


def _adopt(
    root: str, staged: str, folders: Mapping[str, str | None], schema: pa.Schema, prefix: str
) -> WrittenFile | None:
    """Move one staged file into the table under its final name; None if empty."""
    values = _partition_values(folders, schema)
    parts = [
        f"{n}={NULL_PARTITION if v is None else escape_path_name(v)}" for n, v in values.items()
    ]
    relative = "/".join([*parts, f"{prefix}{uuid.uuid4()}.c000.snappy.parquet"])
    storage.move(staged, storage.join(root, relative))
    return _described(root, relative, schema, values)


def _partition_values(folders: Mapping[str, str | None], schema: pa.Schema) -> dict:
    """Delta's partition values of Spark's partition folders (``name`` -> folder text)."""
    return {
        name: partition_string(parse_partition_value(text, schema.field(name).type))
        for name, text in folders.items()
    }


def _described(
    root: str, relative: str, schema: pa.Schema, values: dict | None = None
) -> WrittenFile | None:
    """The ``add`` action of the data file at ``relative`` in the table, from its footer (one
    open and one read of its tail); an empty file is removed and gives None. ``values``: its
    partition values when known, else read from its path."""
    fs, path = storage.filesystem(storage.join(root, relative))
    with fs.open_input_file(path) as handle:
        size = handle.size()
        metadata = pq.read_metadata(handle)
    if metadata.num_rows == 0:
        storage.remove(storage.join(root, relative))
        return None
    if values is None:
        values = _partition_values(_folder_values(relative), schema)
    data = pa.schema([f for f in schema if f.name not in values])
    return WrittenFile(
        path=relative,
        size=size,
        partition_values=values,
        modification_time=now_ms(),
        stats=footer_stats(metadata, data),
        rows=metadata.num_rows,
    )


def _folder_values(relative: str) -> dict[str, str | None]:
    """The partition folders of a path relative to a table or staging root (name -> text)."""
    values: dict[str, str | None] = {}
    for part in relative.split("/")[:-1]:
        key, _, text = part.partition("=")
        values[unquote(key)] = None if text == NULL_PARTITION else unquote(text)
    return values


def _staged(staging: str) -> Iterator[tuple[str, dict[str, str | None]]]:
    """Data files Spark wrote under ``staging`` with the partition values of their folders."""
    for relative in storage.files_under(staging):
        if any(p.startswith(("_", ".")) for p in relative.split("/")):
            continue
        if relative.endswith(".parquet"):
            yield storage.join(staging, relative), _folder_values(relative)
