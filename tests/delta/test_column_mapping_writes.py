"""Writes into column-mapped tables (issue 33), on tables made at test time as delta-spark
writes them (:mod:`tests.delta.foreign`, modes ``name`` and ``id``) and on tables lakefeed
creates with column mapping: every write path stores physical names and Parquet field ids,
keys statistics and partition values by physical name, and reads back the same through
delta-rs's kernel reader (``QueryBuilder``) and through lakefeed; renames and drops are
metadata-only commits."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.connectors import delta
from lakefeed.core.errors import code_of
from lakefeed.delta import files, log, mapping
from tests.delta.test_foreign_tables import _sorted, _spark_rows, expected, python_read

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves

MODES = {"name": "column-mapping-name", "id": "column-mapping-id"}
PARTITIONED = "timestamp-ntz-name"


@pytest.fixture
def copy(foreign: Path, tmp_path: Path) -> Callable[[str], str]:
    """A made table copied into the test's folder (a test writes into it)."""

    def copied(name: str) -> str:
        root = tmp_path / name
        shutil.copytree(foreign / name, root)
        return str(root)

    return copied


def _commit(root: str, version: int) -> list[dict]:
    text = Path(log.commit_path(root, version)).read_text()
    return [json.loads(line) for line in text.splitlines()]


def _check_files(root: str, since: int | None = None) -> int:
    """Every file the commits after ``since`` (default: the newest commit alone) add stores
    physical names with field ids, and its stats and partition values are keyed by physical
    name; the number of files."""
    table = log.open_table(root)
    columns = log.table_mapping(table)
    physical = {c.physical: c for c in columns.columns}
    latest = log.latest_version(root) or 0
    first = latest if since is None else since + 1
    adds = [a["add"] for v in range(first, latest + 1) for a in _commit(root, v) if "add" in a]
    for add in adds:
        schema = pq.read_schema(files.local_path(root, add["path"]))
        for field in schema:
            assert field.name in physical, (field.name, add["path"])
            ident = physical[field.name].id
            assert (field.metadata or {}).get(mapping.FIELD_ID) == str(ident).encode()
        stats = json.loads(add["stats"])
        assert set(stats["nullCount"]) <= set(physical)
        assert set(add["partitionValues"]) <= set(physical)
    return len(adds)


def _made_rows(spark, root: str):  # noqa: ANN001, ANN202
    """The made table's rows, pinned to its version (a write into the table must not
    change what they are)."""
    version = str(log.latest_version(root))
    return spark.read.format("delta").option("versionAsOf", version).load(root)


def _lakefeed(spark, root: str) -> list[tuple]:  # noqa: ANN001
    return _spark_rows(spark.read.format("delta").load(root))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_appends_store_physical_names_and_field_ids(
    spark, copy: Callable[[str], str], mode: str
) -> None:
    root = copy(MODES[mode])
    rows = _made_rows(spark, root)
    before = expected(root)
    rows.write.format("delta").mode("append").save(root)
    assert _check_files(root) > 0
    rows.write.format("delta").mode("append").option("lakefeed.writer", "python").save(root)
    assert _check_files(root) > 0
    after = expected(root)
    assert after == sorted(before * 3, key=repr)
    assert _lakefeed(spark, root) == after


@pytest.mark.parametrize("name", [*MODES.values(), PARTITIONED])
def test_the_python_writer_without_spark(copy: Callable[[str], str], name: str) -> None:
    """The Python sink's path (tasks write Arrow, the driver commits), Spark-free: the made
    table's rows written again through it read back twice over."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from lakefeed.connectors.delta.datasource import write_spec
    from lakefeed.delta import commit
    from lakefeed.delta.spark_read import spark_schema

    root = copy(name)
    schema = spark_schema(log.open_table(root))
    before = expected(root)
    spec = write_spec({"path": root}, schema, overwrite=False)
    batches = (spec.physical(b) for b in python_read(root).to_batches())
    written = files.write_batches(root, batches, spec.file_partition_by, "part-py-")
    commit.commit_files(spec, written, to_arrow_schema(schema, timezone="UTC"))
    assert _check_files(root) == len(written) > 0
    assert expected(root) == sorted(before * 2, key=repr)
    assert _sorted(python_read(root)) == expected(root)


def test_partitioned_stream_and_overwrite(
    spark, tmp_path: Path, copy: Callable[[str], str]
) -> None:
    root = copy(PARTITIONED)
    rows = _made_rows(spark, root)
    rows.write.mode("overwrite").parquet(str(tmp_path / "landing"))
    before = expected(root)
    stream = spark.readStream.schema(rows.schema).parquet(str(tmp_path / "landing"))
    query = delta.write_stream(stream, root, str(tmp_path / "cp"))
    query.processAllAvailable()
    query.stop()
    assert _check_files(root, since=0) > 0
    assert expected(root) == sorted(before * 2, key=repr)
    rows.where("id = 0").write.format("delta").mode("overwrite").save(root)
    assert _check_files(root) > 0
    assert expected(root) == _lakefeed(spark, root) == [r for r in before if r[0] == 0]


def test_delete_update_merge_and_replace_where(spark, copy: Callable[[str], str]) -> None:
    """delta-rs's DELETE, UPDATE and MERGE and the replaceWhere write (delta-rs writes them,
    physical names included) once lakefeed lets them at a column-mapped table."""
    root = copy(MODES["id"])
    api = DeltaTable.forPath(spark, root)
    api.delete("num = 1")
    api.update("num = 2", {"label": F.lit("two")})
    source = spark.createDataFrame([(3, "three"), (9, "nine")], "num int, label string")
    (
        api.alias("t")
        .merge(source.alias("s"), "t.num = s.num")
        .whenMatchedUpdate(set={"label": "s.label"})
        .whenNotMatchedInsert(values={"num": "s.num", "label": "s.label"})
        .execute()
    )
    assert _check_files(root) > 0
    strings = spark.read.format("delta").load(root).select("num", "label")
    assert sorted(map(tuple, strings.collect()), key=repr) == sorted(
        [(0, "0"), (2, "two"), (3, "three"), (4, "4"), (9, "nine"), (None, None)], key=repr
    )
    rows = spark.read.format("delta").load(root).where("num = 4")
    rows.write.format("delta").mode("overwrite").option("replaceWhere", "num = 4").save(root)
    assert _lakefeed(spark, root) == expected(root)
    assert len(expected(root)) == 6


def test_merge_into_and_optimize_with_vectors_through_spark(
    spark, copy: Callable[[str], str]
) -> None:
    """On the column-mapped table with deletion vectors, SQL ``MERGE INTO`` marks rows (no
    copy-on-write) and ``OPTIMIZE`` compacts (delta-rs refuses it there) and purges the
    vectors; Spark, lakefeed's reader and delta-rs's kernel read the same rows."""
    root = copy("dv-column-mapping")
    version = log.latest_version(root)
    source = spark.createDataFrame(
        [(2, 12, "s12"), (7, 77, "s77")], "part int, col1 int, col2 string"
    )
    source.createOrReplaceTempView("cm33_source")
    spark.sql(
        f"MERGE INTO delta.`{root}` t USING cm33_source s ON t.col1 = s.col1 "
        "WHEN MATCHED THEN UPDATE SET col2 = s.col2 WHEN NOT MATCHED THEN INSERT *"
    )
    merged = _commit(root, version + 1)
    assert any(a["add"].get("deletionVector") for a in merged if "add" in a)
    assert _lakefeed(spark, root) == expected(root)
    optimized = spark.sql(f"OPTIMIZE delta.`{root}`").first()
    assert int(optimized.metrics["numFilesRemoved"]) > int(optimized.metrics["numFilesAdded"])
    assert not any(a["add"].get("deletionVector") for a in _commit(root, version + 2) if "add" in a)
    assert _check_files(root, version) > 0
    rows = expected(root)
    assert (2, 12, "s12") in rows and (7, 77, "s77") in rows
    assert _lakefeed(spark, root) == rows


def test_merge_schema_assigns_ids_and_physical_names(spark, copy: Callable[[str], str]) -> None:
    root = copy(MODES["name"])
    max_id = int(log.open_table(root).metadata().configuration[mapping.MAX_ID])
    rows = _made_rows(spark, root).withColumn("extra", F.lit("x"))
    rows.write.format("delta").mode("append").option("mergeSchema", "true").save(root)
    table = log.open_table(root)
    added = table.schema().fields[-1]
    assert added.name == "extra"
    assert added.metadata[mapping.ID] == max_id + 1
    assert str(added.metadata[mapping.PHYSICAL_NAME]).startswith("col-")
    assert table.metadata().configuration[mapping.MAX_ID] == str(max_id + 1)
    assert _check_files(root) > 0
    assert _lakefeed(spark, root) == expected(root)
    assert sum(1 for r in expected(root) if r[-1] == "x") == 6


@pytest.mark.parametrize("mode", ["name", "id"])
def test_tables_created_with_column_mapping(spark, tmp_path: Path, mode: str) -> None:
    """``TBLPROPERTIES`` (and so ``table_properties``, the builder: one create path)."""
    root = tmp_path / "t"
    spark.sql(
        f"CREATE TABLE delta.`{root}` (id INT, name STRING, part STRING) USING DELTA "
        f"PARTITIONED BY (part) TBLPROPERTIES ('delta.columnMapping.mode' = '{mode}')"
    )
    table = log.open_table(str(root))
    assert log.table_mapping(table).mode == mode
    assert all(c.physical.startswith("col-") for c in log.table_mapping(table).columns)
    frame = spark.createDataFrame(
        [(1, "a", "p"), (2, None, "q")], "id int, name string, part string"
    )
    frame.write.format("delta").mode("append").save(str(root))
    assert _check_files(str(root)) == 2
    assert expected(root) == _lakefeed(spark, str(root)) == [(1, "a", "p"), (2, None, "q")]
    built = tmp_path / "built"
    (
        DeltaTable.create(spark)
        .location(str(built))
        .addColumn("id", "INT")
        .property("delta.columnMapping.mode", mode)
        .execute()
    )
    assert log.table_mapping(log.open_table(str(built))).mode == mode


def test_rename_and_drop_are_metadata_only(spark, tmp_path: Path) -> None:
    root = tmp_path / "t"
    frame = spark.createDataFrame([(1, "a", 10), (2, "b", 20)], "id int, name string, n int")
    frame.write.format("delta").save(str(root))
    files = sorted(p.name for p in root.glob("*.parquet"))
    spark.sql(f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.columnMapping.mode'='name')")
    table = log.open_table(str(root))
    assert (table.protocol().min_reader_version, table.protocol().min_writer_version) == (2, 5)
    assert [c.physical for c in log.table_mapping(table).columns] == ["id", "name", "n"]
    spark.sql(f"ALTER TABLE delta.`{root}` RENAME COLUMN name TO label")
    spark.sql(f"ALTER TABLE delta.`{root}` DROP COLUMN n")
    for version in range(1, log.latest_version(str(root)) + 1):
        assert not [a for a in _commit(str(root), version) if "add" in a or "remove" in a]
    assert sorted(p.name for p in root.glob("*.parquet")) == files
    assert expected(root) == _lakefeed(spark, str(root)) == [(1, "a"), (2, "b")]
    renamed = spark.createDataFrame([(3, "c")], "id int, label string")
    renamed.write.format("delta").mode("append").save(str(root))
    assert _check_files(str(root)) == 1
    assert expected(root) == _lakefeed(spark, str(root)) == [(1, "a"), (2, "b"), (3, "c")]
    # a column added under the dropped one's name is a new column: the old values stay gone
    again = spark.createDataFrame([(4, "d", 40)], "id int, label string, n int")
    again.write.format("delta").mode("append").option("mergeSchema", "true").save(str(root))
    assert (
        expected(root)
        == _lakefeed(spark, str(root))
        == [(1, "a", None), (2, "b", None), (3, "c", None), (4, "d", 40)]
    )


def test_rename_and_drop_need_column_mapping(spark, tmp_path: Path) -> None:
    root = tmp_path / "t"
    spark.createDataFrame([(1, "a")], "id int, name string").write.format("delta").save(str(root))
    for statement, code in [
        ("RENAME COLUMN name TO label", "DELTA_UNSUPPORTED_RENAME_COLUMN"),
        ("DROP COLUMN name", "DELTA_UNSUPPORTED_DROP_COLUMN"),
    ]:
        with pytest.raises(Exception) as refused:
            spark.sql(f"ALTER TABLE delta.`{root}` {statement}")
        assert code_of(refused.value) == code, statement
        assert "delta.columnMapping.mode" in str(refused.value)
    assert log.latest_version(str(root)) == 0


def test_a_stream_reading_the_table_stops_on_a_rename(copy: Callable[[str], str]) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from lakefeed.connectors.delta import offsets
    from lakefeed.delta import alter
    from lakefeed.delta.spark_read import spark_schema

    root = copy(MODES["name"])
    table = log.open_table(root)
    target = to_arrow_schema(spark_schema(table), timezone="UTC")
    feed = offsets.ChangeFeed(root, offsets.FeedOptions(), target, log.table_mapping(table))
    alter.rename_column(root, "label", "text")
    with pytest.raises(log.DeltaSourceError) as refused:
        feed.latest_offset(offsets.DeltaOffset(1, -1, False), 1, limited=True)
    assert refused.value.code == offsets.INCOMPATIBLE_SCHEMA


PIPELINE = """
import dlt

MAPPED = {"delta.columnMapping.mode": "name"}


@dlt.table(table_properties=MAPPED)
def readings():
    return (
        spark.readStream.format("lakefeed_iot")
        .option("totalRows", 200).option("rowsPerSecond", 1000).option("devices", 4)
        .option("seed", 7).option("startTime", "2026-01-01T00:00:00Z")
        .option("malformedRate", 0).option("duplicateRate", 0)
        .load()
    )


@dlt.table(table_properties={"delta.columnMapping.mode": "id"})
def counts():
    return spark.read.table("readings").groupBy("device_id").count()


@dlt.view
def changes():
    return spark.readStream.format("delta").load(CHANGES)


dlt.create_streaming_table("customers", table_properties=MAPPED)
dlt.apply_changes(target="customers", source="changes", keys=["id"], sequence_by="seq")
"""


def test_a_pipeline_writes_column_mapped_tables(spark, tmp_path: Path) -> None:
    """A streaming table, a materialized view (run twice: its overwrite keeps the schema) and
    an AUTO CDC target created with column mapping; all read back as delta-rs reads them."""
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.runtime.runner import PipelineRunner, RunOptions
    from tests.pipeline.support import load, write

    changes = str(tmp_path / "changes")
    code = PIPELINE.replace("CHANGES", repr(changes))
    folder = write(tmp_path / "p", {"pipeline.py": code})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    rows = [(1, "a", 1), (2, "b", 1), (1, "a2", 2)]
    spark.createDataFrame(rows, "id int, name string, seq int").write.format("delta").save(changes)
    for _ in range(2):
        runner = PipelineRunner(load([folder]), lakehouse, spark, RunOptions(mode="available-now"))
        assert runner.run().ok
    for name, mode in [("readings", "name"), ("counts", "id"), ("customers", "name")]:
        root = str(lakehouse.table_path(name))
        assert log.table_mapping(log.open_table(root)).mode == mode, name
        assert expected(root) == _lakefeed(spark, root), name
    assert sum(r[-1] for r in expected(lakehouse.table_path("counts"))) == 200
    customers = sorted(r[:2] for r in expected(lakehouse.table_path("customers")))
    assert customers == [(1, "a2"), (2, "b")]


def test_renames_and_drops_of_partition_and_nested_columns(copy: Callable[[str], str]) -> None:
    """Spark-free: the Python reader and delta-rs agree after each metadata-only change."""
    from lakefeed.delta import alter

    root = copy(PARTITIONED)
    alter.rename_column(root, "local_day", "day")
    assert list(log.open_table(root).metadata().partition_columns) == ["day"]
    assert _sorted(python_read(root)) == expected(root)
    with pytest.raises(Exception) as refused:
        alter.drop_columns(root, ["day"])
    assert code_of(refused.value) == "DELTA_UNSUPPORTED_DROP_COLUMN"
    nested = copy(MODES["name"])
    alter.rename_column(nested, "nested.tag", "renamed")
    alter.drop_columns(nested, ["nested.inner", "maps"])
    schema = python_read(nested).schema
    assert schema.field("nested").type.names == ["renamed"]
    assert "maps" not in schema.names
    assert _sorted(python_read(nested)) == expected(nested)
    assert alter.drop_columns(nested, ["gone"], if_exists=True) is None
    for call, code in [
        (
            lambda: alter.rename_column(nested, "tiny", "SMALL"),
            "DELTA_COLUMN_ALREADY_EXISTS",
        ),
        (lambda: alter.rename_column(nested, "nope", "x"), "DELTA_COLUMN_NOT_FOUND"),
        (
            lambda: alter.enable_column_mapping(nested, "id"),
            "DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE",
        ),
    ]:
        with pytest.raises(Exception) as refused:
            call()
        assert code_of(refused.value) == code


def test_a_column_a_constraint_uses_is_neither_renamed_nor_dropped(
    copy: Callable[[str], str],
) -> None:
    from lakefeed.delta import alter, operations

    root = copy(MODES["name"])
    operations.add_constraint(root, "positive", "num IS NULL OR num >= 0")
    for call in (
        lambda: alter.rename_column(root, "num", "i"),
        lambda: alter.drop_columns(root, ["num"]),
    ):
        with pytest.raises(Exception) as refused:
            call()
        assert code_of(refused.value) == "DELTA_DEPENDENT_COLUMN_CHANGE"
    alter.rename_column(root, "big", "l")  # others are free


def test_files_written_before_a_column_was_remapped_are_not_committed(
    copy: Callable[[str], str],
) -> None:
    """A write prepared, then the column dropped and added again (a new physical name): its
    files carry the old one, so the commit is refused (retry) instead of losing the column."""
    from pyspark.sql.pandas.types import to_arrow_schema

    from lakefeed.connectors.delta.datasource import write_spec
    from lakefeed.core.errors import ConflictError
    from lakefeed.delta import alter, commit
    from lakefeed.delta.spark_read import spark_schema

    root = copy(MODES["name"])
    schema = spark_schema(log.open_table(root))
    spec = write_spec({"path": root}, schema, overwrite=False)
    rows = python_read(root)
    written = files.write_batches(
        root, (spec.physical(b) for b in rows.to_batches()), spec.file_partition_by, "part-x-"
    )
    alter.drop_columns(root, ["label"])
    table = log.open_table(root)
    evolved, _ = alter.evolve(table, [{"name": "label", "type": "string", "nullable": True}])
    alter.add_columns(root, table, json.dumps(evolved), ["label"])
    version = log.latest_version(root)
    with pytest.raises(ConflictError, match="label"):
        commit.commit_files(spec, written, to_arrow_schema(schema, timezone="UTC"))
    assert log.latest_version(root) == version
