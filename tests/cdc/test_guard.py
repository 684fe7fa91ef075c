"""The checkpoint guard over AUTO CDC flows: a batch that rightly changes nothing (stale
changes, a NULL key's own history) is still recorded, and a healthy pipeline is never refused.

DLT's documented ``users`` example, fed in three runs: key 124 inserted (sequence 5), an older
update of 124 (sequence 1: nothing changes in the SCD1 target), key 125 inserted.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import types as T

from lakefeed.testing import PipelineTest
from tests.pipeline.support import write

USERS = """
import lakefeed as lf

@lf.view
def users():
    return lf.source("iot", totalRows=1)  # replaced by the fed batches

for name, scd in (("target_scd1", 1), ("target_scd2", "2")):
    lf.create_streaming_table(name)
    lf.create_auto_cdc_flow(
        target=name,
        source="users",
        keys=["userId"],
        sequence_by="sequenceNum",
        apply_as_deletes="operation = 'DELETE'",
        except_column_list=["operation", "sequenceNum"],
        stored_as_scd_type=scd,
    )
"""
SCHEMA = T.StructType(
    [
        T.StructField("userId", T.LongType()),
        T.StructField("name", T.StringType()),
        T.StructField("city", T.StringType()),
        T.StructField("operation", T.StringType()),
        T.StructField("sequenceNum", T.LongType()),
    ]
)


def _user(key: int | None, name: str, city: str | None, op: str, seq: int) -> dict:
    return {"userId": key, "name": name, "city": city, "operation": op, "sequenceNum": seq}


def _pipeline(spark, tmp_path: Path) -> PipelineTest:  # noqa: ANN001
    return PipelineTest(write(tmp_path / "p", {"users.py": USERS}), tmp_path, spark=spark)


def test_a_batch_of_stale_changes_does_not_stop_the_next_run(spark, tmp_path: Path) -> None:
    pipe = _pipeline(spark, tmp_path)
    for change in (
        _user(124, "Raul", "Oaxaca", "INSERT", 5),
        _user(124, "Raul", "Cancun", "UPDATE", 1),  # older: the SCD1 target keeps Oaxaca
        _user(125, "Mercedes", "Tijuana", "INSERT", 2),
    ):
        pipe.feed("users", [change], schema=SCHEMA)
        pipe.step()  # each run passes the guard
    current = [(r["userId"], r["city"]) for r in pipe.rows("target_scd1", ["userId"])]
    assert current == [(124, "Oaxaca"), (125, "Tijuana")]
    history = pipe.rows("target_scd2", ["userId", "__START_AT"])
    assert [(r["userId"], r["city"], r["__START_AT"], r["__END_AT"]) for r in history] == [
        (124, "Cancun", 1, 5),
        (124, "Oaxaca", 5, None),
        (125, "Tijuana", 2, None),
    ]
