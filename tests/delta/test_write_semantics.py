"""Delta's schema validation for appends that lack table columns (docs.delta.io, "Schema
validation"; delta-spark's DeltaSuite "missing partition columns" and GeneratedColumnSuite "not
null should be enforced"), alike for ``df.write.format("delta")``, ``writeStream`` and
lakefeed's explicit ``write``/``write_stream``, with both of lakefeed's writers."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable as RsTable
from pyspark.sql import functions as F

from lakefeed.connectors import delta
from lakefeed.delta import DeltaTable
from lakefeed.errors import code_of


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
