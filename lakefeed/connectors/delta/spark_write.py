"""Writes to Delta whose data files Spark's own (JVM) Parquet writer produces.

A Python Data Source sink receives every row as Arrow in a Python worker before anything is
written; measured, that hand-over alone costs more than Spark's whole Parquet write
(docs/benchmarks.md). So a stream into Delta runs as ``foreachBatch``: Spark writes the batch
into a staging folder inside the table (its commit protocol removes the files of failed
tasks), the driver reads the footers for statistics, renames the files into the table under
the batch's stream file names and commits them with the same ``txn`` action as the Python
sink. Exactly-once is unchanged: a replayed batch finds its txn and writes nothing; files
renamed but never committed carry their batch's name and go when that batch commits; a staging
folder left by a killed driver goes at the first batch of the query's next run. A batch
``save()`` takes the same path as one commit (with its optional ``txnAppId``/``txnVersion``);
what a killed driver left of it goes with ``vacuum``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from lakefeed import storage
from lakefeed.connectors.delta import commit
from lakefeed.connectors.delta.files import (
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
from lakefeed.connectors.delta.snapshot import Snapshot, for_stream
from lakefeed.connectors.delta.stats import footer_stats

TIMESTAMP_CONF = "spark.sql.parquet.outputTimestampType"
TIMESTAMP_MICROS = "TIMESTAMP_MICROS"
"""What Delta readers expect; set for the whole session by ``lakefeed.spark_session()``."""
WRITER_OPTION = "lakefeed.writer"
"""``spark``: Spark writes the data files; ``python``: the Python Data Source sink. Default:
:func:`default_writer`."""
BATCH_TAG = "write"
"""Staging folders of batch writes; a stream's carry its query's app tag."""


def default_writer(root: str) -> str:
    """``python`` for a table on object storage, else ``spark``.

    On S3 Spark's staged write goes through S3A's ``FileOutputCommitter``: task and job commits
    rename every file (a copy and a delete each on S3, with listings around them) and lakefeed
    then moves each file into the table (one more copy). The Python writer puts each data file
    at its final key once. Measured with ``bench/deploy`` against moto: 92 instead of 143
    requests per micro-batch, 1.75x the rows/s (docs/benchmarks.md, "Deployment").
    """
    return "python" if storage.is_object_store(root) else "spark"


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
    (:func:`~lakefeed.connectors.delta.snapshot.for_stream`).
    """

    def __init__(self, spec: commit.WriteSpec, checkpoint: str) -> None:
        self.spec = spec
        self.checkpoint = checkpoint
        self.app_id: str | None = None

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        first = self.app_id is None
        app_id = self.app_id or self._first_batch()
        if _committed(for_stream(self.spec.root, app_id), (app_id, batch_id)):
            # A replay after a crash between the Delta commit and Spark's commit log: nothing to
            # write, but files an earlier attempt adopted and never committed go now (the
            # commit skips on its txn, then removes them).
            schema = to_arrow_schema(frame.schema, timezone="UTC")
            commit.commit_stream_batch(self.spec, [], schema, app_id, batch_id)
            return
        staging = _staging_folder(self.spec.root, app_tag(app_id))
        files, schema = _write(frame, self.spec, staging, stream_file_prefix(app_id, batch_id))
        commit.commit_stream_batch(self.spec, files, schema, app_id, batch_id, sweep=first)
        storage.remove_tree(staging)

    def _first_batch(self) -> str:
        from lakefeed.connectors.delta.datasource import query_id

        app_id = query_id({"checkpointLocation": self.checkpoint})
        _drop_staging(self.spec.root, app_tag(app_id) + "-")
        self.app_id = app_id
        return app_id


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
    if txn is not None and _committed(snapshot, txn):
        return  # the idempotent write (txnAppId/txnVersion) is already in the table
    staging = _staging_folder(spec.root, BATCH_TAG)
    files: list[WrittenFile] = []
    try:
        files, schema = _write(frame, spec, staging, f"part-{uuid.uuid4().hex[:8]}-")
        result = commit.commit_files(spec, files, schema, txn=txn, snapshot=snapshot)
        if result.skipped:
            remove_files(spec.root, files)  # another writer committed the same txn meanwhile
    except BaseException:
        remove_files(spec.root, files)
        raise
    finally:
        storage.remove_tree(staging)


def _write(
    frame: DataFrame, spec: commit.WriteSpec, staging: str, prefix: str
) -> tuple[list[WrittenFile], pa.Schema]:
    """Spark writes ``frame`` into ``staging``; its files move into the table under ``prefix``."""
    writer = frame.write.mode("overwrite").option("compression", "snappy")
    if spec.partition_by:
        writer = writer.partitionBy(*spec.partition_by)
    writer.parquet(staging)
    schema = to_arrow_schema(frame.schema, timezone="UTC")
    adopted = [_adopt(spec.root, path, values, schema, prefix) for path, values in _staged(staging)]
    return [f for f in adopted if f is not None], schema


def _staging_folder(root: str, tag: str) -> str:
    return storage.join(root, STAGING, f"{tag}-{uuid.uuid4().hex}")


def _committed(snapshot: Snapshot, txn: tuple[str, int]) -> bool:
    """Whether the table's newest version holds ``txn``: a replay writes nothing."""
    snapshot.latest()
    return snapshot.committed(txn)


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
    fs, path = storage.filesystem(staged)
    metadata = pq.read_metadata(path, filesystem=fs)
    if metadata.num_rows == 0:
        storage.remove(staged)
        return None
    values = {
        name: partition_string(parse_partition_value(text, schema.field(name).type))
        for name, text in folders.items()
    }
    parts = [
        f"{n}={NULL_PARTITION if v is None else escape_path_name(v)}" for n, v in values.items()
    ]
    relative = "/".join([*parts, f"{prefix}{uuid.uuid4()}.c000.snappy.parquet"])
    target = storage.join(root, relative)
    storage.move(staged, target)
    data = pa.schema([f for f in schema if f.name not in values])
    return WrittenFile(
        path=relative,
        size=storage.size(target),
        partition_values=values,
        modification_time=now_ms(),
        stats=footer_stats(metadata, data),
        rows=metadata.num_rows,
    )


def _staged(staging: str) -> Iterator[tuple[str, dict[str, str | None]]]:
    """Data files Spark wrote under ``staging`` with the partition values of their folders."""
    from urllib.parse import unquote

    for relative in storage.files_under(staging):
        *folders, name = relative.split("/")
        if any(p.startswith(("_", ".")) for p in relative.split("/")):
            continue
        values: dict[str, str | None] = {}
        for part in folders:
            key, _, text = part.partition("=")
            values[unquote(key)] = None if text == NULL_PARTITION else unquote(text)
        if name.endswith(".parquet"):
            yield storage.join(staging, relative), values
