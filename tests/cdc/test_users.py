"""DLT's documented ``users`` example (SCD1 and SCD2 targets), fed in three runs: key 124
inserted (sequence 5), an older update of 124 (sequence 1: nothing changes in the SCD1 target),
key 125 inserted. A batch that rightly changes nothing is still recorded (its txn), so the
checkpoint guard never refuses the next run; a NULL key is a key like any other (DLT), its
delete applied in both targets.
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


def test_stale_changes_and_a_null_keys_delete_over_three_runs(spark, tmp_path: Path) -> None:
    pipe = _pipeline(spark, tmp_path)
    for changes in (
        [_user(124, "Raul", "Oaxaca", "INSERT", 5), _user(None, "Nul", "Nowhere", "INSERT", 1)],
        [_user(124, "Raul", "Cancun", "UPDATE", 1)],  # older: the SCD1 target keeps Oaxaca
        [_user(125, "Mercedes", "Tijuana", "INSERT", 2), _user(None, "Nul", None, "DELETE", 3)],
    ):
        pipe.feed("users", changes, schema=SCHEMA)
        pipe.step()  # each run passes the guard
    current = [(r["userId"], r["city"]) for r in pipe.rows("target_scd1", ["userId"])]
    assert current == [(124, "Oaxaca"), (125, "Tijuana")]
    history = pipe.rows("target_scd2", ["userId", "__START_AT"])
    assert sorted(
        (r["userId"] or 0, r["city"], r["__START_AT"], r["__END_AT"]) for r in history
    ) == [
        (0, "Nowhere", 1, 3),  # the NULL key's version, closed by its delete
        (124, "Cancun", 1, 5),
        (124, "Oaxaca", 5, None),
        (125, "Tijuana", 2, None),
    ]
