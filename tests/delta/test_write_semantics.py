"""Delta's schema validation for appends that lack table columns (docs.delta.io, "Schema
validation"; delta-spark's DeltaSuite "missing partition columns" and GeneratedColumnSuite "not
null should be enforced"), alike for ``df.write.format("delta")``, ``writeStream`` and
lakefeed's explicit ``write``/``write_stream``, with both of lakefeed's writers."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F

from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.connectors import delta
from lakefeed.core.errors import code_of

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves


def _refused(write) -> tuple[str | None, str]:
    with pytest.raises(Exception) as error:
        write()
    return code_of(error.value), str(error.value)


def _every_way(spark, frame, path: str, landing: Path, checkpoint: Path) -> list:
    """The same append through each public write path, batch (``frame``) and stream (the
    Parquet files at ``landing``); nothing is started when refused."""
    batch = frame.write.format("delta").mode("append")
    frame.write.mode("overwrite").parquet(str(landing))
    rows = spark.readStream.schema(frame.schema).parquet(str(landing))
    stream = rows.writeStream.format("delta").trigger(availableNow=True)
    return [
        lambda: batch.save(path),
        lambda: batch.option("lakefeed.writer", "python").save(path),
        lambda: delta.write(frame, path, mode="append"),
        lambda: stream.option("checkpointLocation", str(checkpoint / "a")).start(path),
        lambda: delta.write_stream(rows, path, str(checkpoint / "b")),
    ]


def _finish(query) -> None:
    """Let a stream (None for a batch write) process its input, then stop it."""
    if query is not None:
        try:
            query.processAllAvailable()
        finally:
            query.stop()


def _failed(write) -> tuple[str | None, str]:
    """The coded error of a write, batch or stream (a stream's run ends in it)."""
    with pytest.raises(Exception) as error:
        _finish(write())
    return code_of(error.value), str(error.value)


def test_appends_lacking_columns(spark, tmp_path: Path) -> None:
    # DeltaSuite "missing partition columns", in Python:
    path = str(tmp_path / "t")
    values = spark.createDataFrame([(1,), (2,), (3,)], "value int")
    values.withColumn("part", F.col("value") % 2).write.format("delta").partitionBy("part").save(
        path
    )
    for write in _every_way(spark, values, path, tmp_path / "in", tmp_path / "ckpt"):
        code, message = _refused(write)
        assert code == "DELTA_PARTITION_COLUMN_NOT_FOUND"
        assert "Partition column `part` not found in schema [value]" in message
    assert RsTable(path).version() == 0

    # a nullable column left out is written as null; a NOT NULL one is refused, before any file
    people = str(tmp_path / "people")
    DeltaTable.create(spark).location(people).addColumn("id", "INT", nullable=False).addColumn(
        "name", "STRING"
    ).execute()
    ids = spark.createDataFrame([(1,)], "id int")
    ids.write.format("delta").mode("append").save(people)
    delta.write(ids.withColumn("id", F.lit(2)), people, mode="append")
    rows = spark.read.format("delta").load(people).orderBy("id").collect()
    assert [(r.id, r.name) for r in rows] == [(1, None), (2, None)]
    names = spark.createDataFrame([("x",)], "name string")
    for write in _every_way(spark, names, people, tmp_path / "in2", tmp_path / "ckpt2"):
        code, message = _refused(write)
        assert code == "DELTA_MISSING_NOT_NULL_COLUMN_VALUE"
        assert "Column id, which has a NOT NULL constraint, is missing" in message
    assert RsTable(people).version() == 2


def test_a_failed_post_commit_checkpoint_fails_no_write(spark, tmp_path: Path, lakehouse) -> None:
    """Issue 31: with ``delta.checkpointInterval=1`` and checkpoints that cannot be written
    (``_last_checkpoint`` is a folder), every write path commits, keeps its files and the
    table reads back whole: batch (both writers), stream (both sinks), a pipeline's Delta sink
    and the ``DeltaTable`` changes."""
    from lakefeed.connectors.base import QueryStart
    from lakefeed.connectors.delta.pipeline_sink import DeltaSink

    path = str(tmp_path / "t")
    spark.range(1).write.format("delta").save(path)
    RsTable(path).alter.set_table_properties({"delta.checkpointInterval": "1"})
    last = tmp_path / "t" / "_delta_log" / "_last_checkpoint"
    last.unlink()
    (last / "obstacle").mkdir(parents=True)
    frame = spark.range(1, 2)
    ways = _every_way(spark, frame, path, tmp_path / "in", tmp_path / "ckpt")
    rows = spark.readStream.schema(frame.schema).parquet(str(tmp_path / "in"))
    ways.append(
        lambda: DeltaSink().write_stream(
            rows,
            {"path": path},
            QueryStart(
                str(tmp_path / "ckpt" / "sink"),
                output_mode="append",
                query_name="sink",
                trigger={"availableNow": True},
            ),
            lakehouse,
        )
    )
    for write in ways:
        _finish(write())
    assert sorted(RsTable(path).to_pyarrow_table().column("id").to_pylist()) == [0] + [1] * 6
    table = DeltaTable.forPath(spark, path)
    table.delete("id = 0")
    table.alias("t").merge(
        spark.range(2, 3).alias("s"), "t.id = s.id"
    ).whenNotMatchedInsertAll().execute()
    table.update("id = 2", {"id": "3"})
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [1] * 6 + [3]
    assert last.is_dir()  # the obstacle held: no checkpoint was written


def test_check_constraints_hold_on_every_write_path(spark, tmp_path: Path) -> None:
    """Issues 31 and 33: a CHECK constraint set by another writer (delta-rs) or by lakefeed's
    SQL fails every write with a violating row, with Delta's error and the row's values, and
    commits nothing of it; adding a constraint that rows break is refused."""
    path = str(tmp_path / "t")
    spark.createDataFrame([(1, 5.0)], "id long, amount double").write.format("delta").save(path)
    RsTable(path).alter.add_constraint({"amount_pos": "amount > 0"})
    bad = spark.createDataFrame([(2, 3.0), (3, -4.0)], "id long, amount double")
    for write in _every_way(spark, bad, path, tmp_path / "in", tmp_path / "ckpt"):
        code, message = _failed(write)
        assert code == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", message
        assert "CHECK constraint amount_pos (amount > 0) violated by row with values:" in message
        assert " - amount : -4.0" in message
    table = DeltaTable.forPath(spark, path)
    for change in (
        lambda: table.update("id = 1", {"amount": "-1"}),
        lambda: (
            table.alias("t")
            .merge(bad.alias("s"), "t.id = s.id")
            .whenNotMatchedInsertAll()
            .execute()
        ),
    ):
        code, message = _failed(change)
        assert code == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", message
    assert RsTable(path).version() == 1
    assert [(r.id, r.amount) for r in table.toDF().collect()] == [(1, 5.0)]

    spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT small CHECK (amount < 10)")
    code, message = _failed(
        lambda: spark.sql(f"ALTER TABLE delta.`{path}` ADD CONSTRAINT big CHECK (amount > 7)")
    )
    assert code == "DELTA_NEW_CHECK_CONSTRAINT_VIOLATION"
    assert "1 rows in" in message and "violate the new CHECK constraint (amount > 7)" in message
    code, message = _failed(
        lambda: (
            spark.createDataFrame([(4, 12.0)], "id long, amount double")
            .write.format("delta")
            .mode("append")
            .save(path)
        )
    )
    assert code == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES" and "small (amount < 10)" in message
    spark.sql(f"ALTER TABLE delta.`{path}` DROP CONSTRAINT amount_pos")
    spark.sql(f"ALTER TABLE delta.`{path}` DROP CONSTRAINT IF EXISTS amount_pos")
    bad.write.format("delta").mode("append").save(path)
    assert sorted(r.id for r in table.toDF().collect()) == [1, 2, 3]


def test_nan_partition_values_round_trip(spark, tmp_path: Path) -> None:
    """Issue 31: DOUBLE partition values NaN, 1.0 and NULL, written by each writer and read
    back by lakefeed and delta-rs; the log says "NaN" as delta-spark writes it."""
    rows = spark.createDataFrame([(1, float("nan")), (2, 1.0), (3, None)], "id int, p double")
    for writer in ("spark", "python"):
        path = str(tmp_path / writer)
        rows.write.format("delta").partitionBy("p").option("lakefeed.writer", writer).save(path)
        back = spark.read.format("delta").load(path)
        assert back.count() == 3 and back.where("isnan(p)").count() == 1, writer
        assert back.where("p = 1.0").count() == 1 and back.where("p IS NULL").count() == 1
        actions = pa.table(RsTable(path).get_add_actions(flatten=True))
        values = actions.column("partition.p").to_pylist()
        assert len(values) == 3 and sum(v != v for v in values if v is not None) == 1
        assert any("p=NaN" in u for u in RsTable(path).file_uris()), writer


def test_column_default_tables_are_refused_before_writing(spark, tmp_path: Path) -> None:
    """Issue 33: DELETE, MERGE and append on a table whose protocol needs column defaults are
    refused with a code naming the feature (before: CONFLICT, "fix: retry"), writing nothing."""
    import json

    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    action = {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["allowColumnDefaults"],
    }
    (tmp_path / "t" / "_delta_log" / f"{1:020d}.json").write_text(
        json.dumps({"protocol": action}) + "\n" + json.dumps({"commitInfo": {}}) + "\n"
    )
    table = DeltaTable.forPath(spark, path)
    before = sorted(os.listdir(path))
    for write in (
        lambda: table.delete("id = 1"),
        lambda: (
            table.alias("t")
            .merge(spark.range(5).alias("s"), "t.id = s.id")
            .whenNotMatchedInsertAll()
            .execute()
        ),
        lambda: spark.range(3, 4).write.format("delta").mode("append").save(path),
    ):
        code, message = _failed(write)
        assert code == "DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED", message
        assert "allowColumnDefaults" in message
    assert sorted(os.listdir(path)) == before and RsTable(path).version() == 1
