"""The empty batch frame validation gives a view reading a table not written yet."""

from __future__ import annotations

from pyspark.sql.types import StructType

from lakefeed.runtime.evaluate import empty_frame


def test_an_empty_frame_has_the_schema_no_rows_and_is_batch(spark) -> None:
    schema = StructType.fromDDL("id BIGINT NOT NULL, tags ARRAY<STRING>, at TIMESTAMP")
    frame = empty_frame(spark, schema)
    assert frame.schema == schema and not frame.isStreaming
    assert frame.count() == 0
    assert frame.groupBy("id").count().collect() == []
