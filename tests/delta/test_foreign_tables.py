"""Conformance on Delta tables lakefeed did not write: tables shaped as delta-spark writes them,
made at test time from the protocol by :mod:`tests.delta.foreign` (the ``foreign`` fixture):
deletion vectors (inline, on disk, by path), column mapping (name and id), timestampNtz,
classic, multi-part and v2 checkpoints. The expected rows come from delta-rs's kernel reader
(``QueryBuilder``), computed here, never written down; the first test checks that the maker
made what it meant to, by that same reader.

Spark-free tests read through the Python reader (the Spark Connect / JDK-less path) and the
stream planner; the Spark tests read through ``format("delta")`` with Spark's Parquet scan.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql.pandas.types import to_arrow_schema

from lakefeed.connectors.delta import offsets
from lakefeed.delta import dv, files, log, pruning
from lakefeed.delta.options import time_travel_version
from lakefeed.delta.spark_read import spark_schema
from tests.delta.foreign import TableMaker

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves

READABLE = [
    "dv-partitioned",
    "dv-column-mapping",
    "dv-storage-kinds",
    "dv-change-feed",
    "column-mapping-name",
    "column-mapping-id",
    "stats-all-types-name",
    "stats-all-types-id",
    "timestamp-ntz",
    "timestamp-ntz-name",
    "timestamp-ntz-id",
    "multi-part-checkpoint",
    "v2-checkpoint-json",
    "v2-checkpoint-parquet",
    "in-commit-timestamps",
]
DV_TABLES = ["dv-partitioned", "dv-column-mapping"]
REFUSED = {
    "type-widening-preview": "typeWidening-preview",
    "variant-preview": "variantType-preview",
}
Made = tuple[Path, dict[str, pa.Table]]
"""The ``made`` fixture: the folder of the made tables and the rows each was made to hold."""
DELTA_RS_REFUSES = {
    "vacuum-protocol-check": "VacuumProtocolCheck",
    "type-widening-preview": "TypeWideningPreview",
}
"""deltalake 1.6.6's kernel scan refuses these features ("Unsupported table features
required"); its ``DeltaTable`` still opens the tables. lakefeed reads the first itself."""


def expected(root: Path | str, version: int | None = None) -> list[tuple]:
    """The table's rows as delta-rs's kernel reader returns them, sorted."""
    table = DeltaTable(str(root), version=version)
    return _sorted(pa.table(QueryBuilder().register("t", table).execute("select * from t")))


def _sorted(table: pa.Table) -> list[tuple]:
    rows = [tuple(_plain(row[name]) for name in table.column_names) for row in table.to_pylist()]
    return sorted(rows, key=repr)


def _plain(value: object) -> object:
    """Maps come back from Arrow as lists of pairs, Spark's timestamps in its time zone:
    compare tuples and UTC."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _plain(v)) for k, v in value.items())
    return value


def python_read(root: str, version: int | None = None) -> pa.Table:
    """The table as lakefeed's Python reader returns it (every file of the snapshot)."""
    table = log.open_table(root, version)
    target = to_arrow_schema(spark_schema(table), timezone="UTC")
    columns = log.table_mapping(table)
    batches = [
        batch
        for file in pruning.table_files(table, root)
        for batch in files.read_file(root, file, target, columns)
    ]
    return pa.Table.from_batches(batches, schema=target)


@pytest.mark.parametrize("name", sorted(set(READABLE) | set(REFUSED) | set(DELTA_RS_REFUSES)))
def test_the_made_tables_hold_what_they_were_made_to_hold(made: Made, name: str) -> None:
    """The maker checked by an independent reader: delta-rs's kernel reads each table's
    intended rows (or refuses its feature by name, see DELTA_RS_REFUSES)."""
    folder, intended = made
    root = folder / name
    if name in DELTA_RS_REFUSES:
        with pytest.raises(Exception, match=DELTA_RS_REFUSES[name]):
            expected(root)
        DeltaTable(str(root))  # the log itself is readable
        return
    assert expected(root) == _sorted(intended[name])


@pytest.mark.parametrize("name", READABLE)
def test_python_reader_reads_made_tables_as_delta_rs_does(foreign: Path, name: str) -> None:
    root = str(foreign / name)
    assert _sorted(python_read(root)) == expected(root)


def test_python_reader_reads_a_vacuum_protocol_check_table(made: Made) -> None:
    """delta-rs's scan refuses the feature; a reader has nothing to do for it."""
    folder, intended = made
    root = str(folder / "vacuum-protocol-check")
    assert _sorted(python_read(root)) == _sorted(intended["vacuum-protocol-check"])


@pytest.mark.parametrize("name", DV_TABLES)
def test_every_version_of_a_deletion_vector_table_reads_as_delta_rs_reads_it(
    foreign: Path, name: str
) -> None:
    root = str(foreign / name)
    for version in range(log.latest_version(root) + 1):
        assert _sorted(python_read(root, version)) == expected(root, version), version


@pytest.mark.parametrize("name", DV_TABLES)
def test_decoded_descriptors_agree_with_delta_rs(foreign: Path, name: str) -> None:
    """Each commit's deletion vectors, decoded with pyroaring from the log's descriptors,
    are the rows delta-rs's selection vectors drop at that version."""
    root = str(foreign / name)
    checked = 0
    for version in range(1, log.latest_version(root) + 1):
        commit = log.read_commit(root, version)
        assert commit is not None
        by_rs = log.file_deletes(DeltaTable(root, version=version), root)
        for add in commit.adds:
            assert isinstance(add.deletes, dv.Descriptor)
            key = dv.file_key(files.local_path(root, add.path))
            assert isinstance(by_rs[key], dv.Positions)
            assert dv.positions(root, add.deletes).tolist() == by_rs[key].array().tolist()
            checked += 1
    assert checked >= 10


def test_an_inline_deletion_vector_decodes_to_its_rows() -> None:
    """An inline vector as the maker encodes it from the protocol (Z85 of the bitmap)."""
    rows = {3, 4, 7, 11, 18, 29, 1 << 33}
    descriptor = dv.Descriptor.from_json(TableMaker._inline(rows))
    assert descriptor is not None and descriptor.storage_type == "i"
    assert dv.positions("/nowhere", descriptor).tolist() == sorted(rows)


def _first_dv(root: str) -> tuple[dict, dv.Descriptor]:
    actions = log.commit_actions(root, 1)
    assert actions is not None
    add = next(a["add"] for a in actions if "add" in a)
    descriptor = dv.Descriptor.from_json(add["deletionVector"])
    assert descriptor is not None
    return add, descriptor


def test_a_deletion_vector_made_inline_reads_the_same(foreign: Path, tmp_path: Path) -> None:
    """The on-disk vector of a made commit, moved inline into the log (Z85), reads alike:
    both storage kinds go through the same bitmap."""
    root = tmp_path / "t"
    shutil.copytree(foreign / "dv-partitioned", root)
    add, descriptor = _first_dv(str(root))
    blob = Path(descriptor.location(str(root))).read_bytes()
    start = (descriptor.offset or 0) + 4
    data = blob[start : start + descriptor.size]
    data += b"\0" * (-len(data) % 4)
    inline = {**add["deletionVector"], "storageType": "i", "pathOrInlineDv": dv.z85_encode(data)}
    inline.pop("offset")
    text = log.commit_path(str(root), 1)
    lines = Path(text).read_text().splitlines()
    patched = [
        json.dumps({"add": {**add, "deletionVector": inline}}) if '"add"' in line else line
        for line in lines
    ]
    Path(text).write_text("\n".join(patched) + "\n")
    commit = log.read_commit(str(root), 1)
    assert commit is not None and isinstance(commit.adds[0].deletes, dv.Descriptor)
    assert commit.adds[0].deletes.storage_type == "i"
    assert dv.positions(str(root), commit.adds[0].deletes).tolist() == (
        dv.positions(str(root), descriptor).tolist()
    )


def test_a_corrupt_deletion_vector_is_refused_with_its_code(foreign: Path, tmp_path: Path) -> None:
    root = tmp_path / "t"
    shutil.copytree(foreign / "dv-partitioned", root)
    _, descriptor = _first_dv(str(root))
    location = Path(descriptor.location(str(root)))
    blob = bytearray(location.read_bytes())
    blob[(descriptor.offset or 0) + 10] ^= 0xFF
    location.write_bytes(bytes(blob))
    with pytest.raises(dv.DeletionVectorError) as refused:
        dv.positions(str(root), descriptor)
    assert refused.value.code == dv.CORRUPT
    assert zlib.crc32(b"") == 0  # the checksum is zlib's CRC-32


@pytest.mark.parametrize(("name", "feature"), sorted(REFUSED.items()))
def test_unsupported_reader_features_are_refused_naming_them(
    foreign: Path, name: str, feature: str
) -> None:
    with pytest.raises(log.DeltaSourceError) as refused:
        log.open_table(str(foreign / name))
    assert refused.value.code == log.READER_FEATURE
    assert feature in str(refused.value)


@pytest.mark.parametrize("name", DV_TABLES)
def test_stream_snapshot_and_changes_never_return_deleted_rows(foreign: Path, name: str) -> None:
    """A stream from version 0 with ignoreChanges: each DELETE commit re-adds its file with a
    deletion vector, and the stream re-reads that file without the deleted rows (delta-spark's
    ignoreChanges), so every row it emits for version v is a row of the table at v."""
    root = str(foreign / name)
    table = log.open_table(root)
    target = to_arrow_schema(spark_schema(table), timezone="UTC")
    feed = offsets.ChangeFeed(
        root, offsets.FeedOptions(ignore_changes=True), target, log.table_mapping(table)
    )
    start = offsets.DeltaOffset(0, -1, False)
    latest = log.latest_version(root)
    assert latest is not None
    for version in range(latest + 1):
        end = offsets.DeltaOffset(version + 1, -1, False)
        batch = feed.files_between(start, end)
        rows = [
            b for f in batch for b in files.read_file(root, f, target, log.table_mapping(table))
        ]
        emitted = _sorted(pa.Table.from_batches(rows, schema=target)) if rows else []
        assert set(emitted) <= set(expected(root, version)), version
        if version:
            adds = log.read_commit(root, version).adds  # type: ignore[union-attr]
            deleted = sum(a.deletes.cardinality for a in adds)  # type: ignore[union-attr]
            records = sum(pq.read_metadata(files.local_path(root, a.path)).num_rows for a in adds)
            assert len(emitted) == records - deleted
        start = end


def test_stream_refuses_a_column_renamed_under_column_mapping(
    foreign: Path, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    shutil.copytree(foreign / "dv-column-mapping", root)
    table = log.open_table(str(root))
    schema = json.loads(table.schema().to_json())
    schema["fields"][1]["name"] = "renamed"
    metadata = {
        "id": table.metadata().id,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": list(table.metadata().partition_columns),
        "configuration": dict(table.metadata().configuration),
        "createdTime": 0,
    }
    latest = table.version()
    Path(log.commit_path(str(root), latest + 1)).write_text(json.dumps({"metaData": metadata}))
    target = to_arrow_schema(spark_schema(table), timezone="UTC")
    feed = offsets.ChangeFeed(str(root), offsets.FeedOptions(), target, log.table_mapping(table))
    with pytest.raises(log.DeltaSourceError) as refused:
        feed.latest_offset(offsets.DeltaOffset(latest + 1, -1, False), latest + 1, limited=True)
    assert refused.value.code == offsets.INCOMPATIBLE_SCHEMA
    assert "renamed column 'col1'" in str(refused.value)


def test_stream_refuses_a_commit_that_adds_an_unsupported_reader_feature(
    foreign: Path, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    shutil.copytree(foreign / "dv-partitioned", root)
    latest = log.latest_version(str(root))
    assert latest is not None
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors", "typeWidening"],
        "writerFeatures": ["deletionVectors", "typeWidening"],
    }
    Path(log.commit_path(str(root), latest + 1)).write_text(json.dumps({"protocol": protocol}))
    feed = offsets.ChangeFeed(str(root), offsets.FeedOptions())
    with pytest.raises(log.DeltaSourceError) as refused:
        feed.latest_offset(offsets.DeltaOffset(latest + 1, -1, False), latest + 1, limited=True)
    assert refused.value.code == log.READER_FEATURE
    assert "typeWidening" in str(refused.value)


def test_positions_are_sorted_uint64() -> None:
    values = dv.Positions.of(np.array([1, 5, 9]))
    assert values.array().dtype == np.dtype("<u8")
    assert values.array().tolist() == [1, 5, 9]


# ---------------------------------------------------------------- Spark


def _spark_rows(frame) -> list[tuple]:  # noqa: ANN001
    return _sorted(frame.toArrow())


def test_spark_reads_made_tables_as_delta_rs_does(spark, foreign: Path) -> None:
    """``format("delta")``: Spark's Parquet scan (deletion vectors on ``_metadata.row_index``,
    physical names, field ids) and the Python reader (``lakefeed.reader=python``)."""
    for name in READABLE:
        root = str(foreign / name)
        assert _spark_rows(spark.read.format("delta").load(root)) == expected(root), name
    for name in ("dv-column-mapping", "column-mapping-id", "dv-storage-kinds"):
        root = str(foreign / name)
        python = spark.read.format("delta").option("lakefeed.reader", "python").load(root)
        assert _spark_rows(python) == expected(root), name


def test_spark_time_travel_on_a_deletion_vector_table(spark, foreign: Path) -> None:
    root = str(foreign / "dv-column-mapping")
    for version in (0, 3, 9):
        frame = spark.read.format("delta").option("versionAsOf", version).load(root)
        assert _spark_rows(frame) == expected(root, version), version
    history = sorted(DeltaTable(root).history(), key=lambda e: e["version"])
    stamp = dt.datetime.fromtimestamp(history[5]["timestamp"] / 1000, dt.UTC)
    frame = spark.read.format("delta").option("timestampAsOf", stamp.isoformat()).load(root)
    assert _spark_rows(frame) == expected(root, 5)
    # A filter on a column Spark reads by physical name still prunes and still filters.
    kept = spark.read.format("delta").load(root).where("col1 > 30 and part = 5")
    assert _spark_rows(kept) == [r for r in expected(root) if r[1] > 30 and r[0] == 5]


def _stream_rows(spark, root: Path, checkpoint: Path, reader: str, **options: str) -> list:  # noqa: ANN001
    frame = spark.readStream.format("delta").option("lakefeed.reader", reader)
    for key, value in options.items():
        frame = frame.option(key, value)
    return collected(frame.load(str(root)), checkpoint)


def collected(frame, checkpoint: Path) -> list[tuple]:  # noqa: ANN001
    """A streaming DataFrame run once with ``availableNow``: the rows of its micro-batches, in
    the order they came."""
    rows: list[tuple] = []
    query = (
        frame.writeStream.foreachBatch(lambda batch, _: rows.extend(_spark_rows(batch)))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(240)
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    return rows


def _grown(source: Path, root: Path, versions: range) -> None:
    """Commits ``versions`` of the table at ``source`` land in its copy at ``root``."""
    source = source / "_delta_log"
    for version in versions:
        name = f"{version:020d}.json"
        shutil.copy(source / name, root / "_delta_log" / name)


@pytest.mark.parametrize("reader", ["spark", "python"])
def test_stream_follows_a_table_that_gets_deletion_vectors(
    spark, foreign: Path, tmp_path: Path, reader: str
) -> None:
    """A stream on the table's first version; DELETEs with deletion vectors land while it
    runs: without options it stops (a change, as delta-spark's source); with ignoreChanges it
    re-reads each touched file without its deleted rows, never a deleted one."""
    root = tmp_path / "t"
    made = foreign / "dv-column-mapping"
    shutil.copytree(made, root)
    for stale in (root / "_delta_log").iterdir():
        if not stale.name.startswith(f"{0:020d}."):
            stale.unlink()
    snapshot = _stream_rows(spark, made, tmp_path / "cp0", reader)
    assert snapshot == expected(made)
    first = _stream_rows(spark, root, tmp_path / "cp", reader, ignoreChanges="true")
    assert first == expected(root, 0)
    _grown(made, root, range(1, 6))
    again = _stream_rows(spark, root, tmp_path / "cp", reader, ignoreChanges="true")
    adds = [a for v in range(1, 6) for a in log.read_commit(str(root), v).adds]  # type: ignore[union-attr]
    records = sum(pq.read_metadata(files.local_path(str(root), a.path)).num_rows for a in adds)
    deleted = sum(a.deletes.cardinality for a in adds)  # type: ignore[union-attr]
    assert len(again) == records - deleted
    assert set(again) <= set().union(*(expected(root, v) for v in range(1, 6)))
    with pytest.raises(Exception, match="DELTA_SOURCE|ignoreChanges"):
        _stream_rows(spark, root, tmp_path / "cp-strict", reader, startingVersion="1")


PIPELINE = """
import lakefeed as lf

@lf.table
def copied():
    return lf.source("delta", lf.config("src"))
"""


def test_a_pipeline_streams_a_deletion_vector_table_and_verifies_it(
    spark, foreign: Path, tmp_path: Path
) -> None:
    """``lf.source("delta")`` on a table with deletion vectors and column mapping: the rows
    delta-rs reads, and ``verify`` (a batch read at the stream's version) agrees."""
    import lakefeed as lf
    from lakefeed.core.lakehouse import Lakehouse
    from tests.pipeline.support import load, table, write

    root = str(foreign / "dv-column-mapping")
    folder = write(tmp_path / "p", {"copy.py": PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    assert lf.run(load([folder], {"src": root}), lakehouse=lakehouse, spark=spark).ok
    assert _sorted(table(lakehouse, "copied")) == expected(root)
    check = lf.verify(
        load([folder], {"src": root}), lakehouse=lakehouse, spark=spark, run_first=False
    )
    assert check.ok, check.tables


def test_the_compatibility_page_lists_the_reader_features_of_the_code() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "delta-compatibility.md").read_text()
    start = page.index("<!-- reader-features")
    table = page[page.index("\n", start) + 1 : page.index("<!-- /reader-features -->")]
    assert table.strip() == log.feature_table()


def _renamed_file_table(made: Path, root: Path) -> None:
    """The made DV table with a file that has deleted rows in its latest version renamed to
    a name with a space, a '%' and a '+' (JSON log only: the checkpoint goes)."""
    source = str(made / "dv-column-mapping")
    path = next(f.path for f in pruning.table_files(log.open_table(source), source) if f.deletes)
    shutil.copytree(source, root)
    for checkpoint in (root / "_delta_log").glob("*checkpoint*"):
        checkpoint.unlink()
    folder, old = path.rsplit("/", 1)
    new = "part a%b+c.snappy.parquet"
    encoded = f"{folder}/part%20a%25b%2Bc.snappy.parquet"
    (root / folder / old).rename(root / folder / new)
    for commit in (root / "_delta_log").glob("*.json"):
        commit.write_text(commit.read_text().replace(path, encoded))


def test_spark_applies_deletion_vectors_to_files_with_special_names(
    spark, foreign: Path, tmp_path: Path
) -> None:
    """Spark's scan matches deleted rows by ``_metadata.file_name``, the decoded name."""
    root = tmp_path / "t"
    _renamed_file_table(foreign, root)
    renamed = pruning.table_files(log.open_table(str(root)), str(root))
    assert any("%20" in f.path and f.deletes for f in renamed)
    assert _spark_rows(spark.read.format("delta").load(str(root))) == expected(root)


def test_deltatable_api_delete_writes_deletion_vectors(
    spark, foreign: Path, tmp_path: Path
) -> None:
    """delta-spark's ``DeltaTable.delete`` on a table with ``delta.enableDeletionVectors``:
    the row is marked in a deletion vector, the data files stay."""
    from lakefeed.compat.delta_spark.tables import DeltaTable as Api

    root = tmp_path / "t"
    shutil.copytree(foreign / "dv-partitioned", root)
    Api.forPath(spark, str(root)).delete("col1 = 30")
    assert log.latest_version(str(root)) == 16
    (add,) = log.read_commit(str(root), 16).adds  # type: ignore[union-attr]
    assert isinstance(add.deletes, dv.Descriptor)
    assert expected(root) == [r for r in expected(foreign / "dv-partitioned") if r[1] != 30]


def test_time_travel_by_timestamp_uses_in_commit_timestamps(tmp_path: Path) -> None:
    """With in-commit timestamps, a commit's time is its ``inCommitTimestamp`` (here an hour
    before the writer's clock said), for timestampAsOf and startingTimestamp alike."""
    from deltalake import write_deltalake

    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"a": [1]}))
    first = DeltaTable(root).history()[0]["timestamp"]
    info = {"timestamp": first + 7_200_000, "inCommitTimestamp": first + 3_600_000}
    Path(log.commit_path(root, 1)).write_text(json.dumps({"commitInfo": info}) + "\n")
    between = dt.datetime.fromtimestamp((first + 5_400_000) / 1000, dt.UTC).isoformat()
    assert time_travel_version(root, {"timestampAsOf": between}) == 1
    assert log.version_at_timestamp(root, log.parse_timestamp(between)) == 2


def test_statistics_prune_by_physical_name_under_column_mapping(foreign: Path) -> None:
    """Statistics and partition values are keyed by physical name: a filter on either still
    skips files, and no skipped file holds a matching row."""
    root = str(foreign / "dv-column-mapping")
    table = log.open_table(root)
    every = pruning.table_files(table, root)
    by_stats = pruning.table_files(table, root, [(">", "col1", 45)])
    by_partition = pruning.table_files(table, root, [("=", "part", 5)])
    assert 0 < len(by_stats) < len(every) and 0 < len(by_partition) < len(every)
    kept = {f.path for f in by_stats}
    target = to_arrow_schema(spark_schema(table), timezone="UTC")
    for file in every:
        if file.path not in kept:
            rows = [b for b in files.read_file(root, file, target, log.table_mapping(table))]
            assert all(r["col1"] <= 45 for b in rows for r in b.to_pylist())
