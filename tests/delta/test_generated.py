"""The Spark-free part of generated columns: reading them from a Delta schema, the schema a
write is checked with, and the coded errors (the Spark side is in test_builder)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import Schema as DeltaSchema

from lakefeed.connectors.delta import generated
from lakefeed.errors import code_of

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
    assert generated.completed(lacking, table, columns).names == ["eventTime", "eventDate"]
    giving = pa.schema([("EVENTDATE", pa.date32()), ("eventTime", pa.timestamp("us", "UTC"))])
    assert generated.completed(giving, table, columns) == giving


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
        generated.refuse_python_sink((("d", "CAST(t AS DATE)"),), "/t")
    assert code_of(python_sink.value) == "DELTA_GENERATED_COLUMNS_NEED_SPARK_WRITER"
