"""The Spark-free part of generated columns: reading them from a Delta schema, the schema a
write is checked with, and the coded errors (the Spark side is in test_builder)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import Schema as DeltaSchema

from lakefeed.core.errors import code_of
from lakefeed.delta import generated

SCHEMA = DeltaSchema.from_json(
    json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "eventTime", "type": "timestamp", "nullable": True, "metadata": {}},
                {
                    "name": "eventDate",
                    "type": "date",
                    "nullable": True,
                    "metadata": {generated.GENERATION_EXPRESSION: "CAST(eventTime AS DATE)"},
                },
            ],
        }
    )
)


def test_expressions_and_the_schema_a_write_is_checked_with() -> None:
    columns = generated.expressions(SCHEMA)
    assert columns == (("eventDate", "CAST(eventTime AS DATE)"),)
    assert generated.expressions(None) == ()
    table = pa.schema([("eventTime", pa.timestamp("us", "UTC")), ("eventDate", pa.date32())])
    lacking = pa.schema([("eventTime", pa.timestamp("us", "UTC"))])
    assert generated.completed(lacking, table, columns, "/t").names == ["eventTime", "eventDate"]
    giving = pa.schema([("EVENTDATE", pa.date32()), ("eventTime", pa.timestamp("us", "UTC"))])
    assert generated.completed(giving, table, columns, "/t") == giving
    # a write lacking what the expression reads is refused, naming only that column
    other = pa.schema([("id", pa.int64()), ("eventDate", pa.date32())])
    with pytest.raises(Exception) as lacks:
        generated.completed(other, pa.schema([("id", pa.int64()), *table]), columns, "/t")
    assert code_of(lacks.value) == "DELTA_GENERATED_COLUMN_INPUT_MISSING"
    assert "computed from `eventTime`, which the written rows lack" in str(lacks.value)
    assert "`id`" not in str(lacks.value)


def test_references_are_the_columns_an_expression_reads() -> None:
    columns = ["eventTime", "date", "a", "s", "x y", "id"]
    assert generated.references("CAST(eventTime AS DATE)", columns) == ["eventTime"]
    assert generated.references('date_format(EVENTTIME, "yyyy-MM")', columns) == ["eventTime"]
    text = "concat(a, 'id', s.id) || `x y` || 1e10 || date"
    assert generated.references(text, columns) == ["date", "a", "s", "x y"]
    assert generated.references("CAST(a AS DECIMAL(10, 2))", columns) == ["a"]


def test_violation_and_python_sink_errors_are_coded() -> None:
    failure = RuntimeError(
        "Job aborted: [USER_RAISED_EXCEPTION] lakefeed generated column violated: CHECK "
        "constraint Generated Column (`d` <=> CAST(t AS DATE)) violated by row with values:\n"
        " - d : 2000-01-01 SQLSTATE: P0001\n\tat org.apache.spark.Something"
    )
    coded = generated.violation(failure, "/t")
    assert coded is not None and code_of(coded) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert str(coded).startswith("[LAKEFEED:DELTA_VIOLATE_CONSTRAINT_WITH_VALUES] CHECK")
    assert " - d : 2000-01-01\n(writing the Delta table /t)" in str(coded)
    assert generated.violation(RuntimeError("disk full"), "/t") is None
    generated.refuse_python_sink((), "/t")
    with pytest.raises(Exception) as python_sink:
        generated.refuse_python_sink(("d",), "/t")
    assert code_of(python_sink.value) == "DELTA_GENERATED_COLUMNS_NEED_SPARK_WRITER"
