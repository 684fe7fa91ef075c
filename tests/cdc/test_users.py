"""An SCD1 and an SCD2 AUTO CDC target over one change feed of accounts, fed in three runs:
key 41 inserted (sequence 5), an older update of 41 (sequence 1: nothing changes in the SCD1
target), key 42 inserted. A batch that rightly changes nothing is still recorded (its txn), so
the checkpoint guard never refuses the next run; a NULL key is a key like any other (DLT), its
delete applied in both targets.
"""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import types as T

import lakefeed as lf
from lakefeed.core.lakehouse import Lakehouse
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
        keys=["account_id"],
        sequence_by="change_seq",
        apply_as_deletes="operation = 'DELETE'",
        except_column_list=["operation", "change_seq"],
        stored_as_scd_type=scd,
    )
"""
SCHEMA = T.StructType(
    [
        T.StructField("account_id", T.LongType()),
        T.StructField("name", T.StringType()),
        T.StructField("city", T.StringType()),
        T.StructField("operation", T.StringType()),
        T.StructField("change_seq", T.LongType()),
    ]
)


def _user(key: int | None, name: str, city: str | None, op: str, seq: int) -> dict:
    return {"account_id": key, "name": name, "city": city, "operation": op, "change_seq": seq}


def _pipeline(spark, tmp_path: Path) -> PipelineTest:  # noqa: ANN001
    return PipelineTest(write(tmp_path / "p", {"users.py": USERS}), tmp_path, spark=spark)


def test_stale_changes_and_a_null_keys_delete_over_three_runs(spark, tmp_path: Path) -> None:
    pipe = _pipeline(spark, tmp_path)
    for changes in (
        [_user(41, "Ines", "Quito", "INSERT", 5), _user(None, "Nul", "Nowhere", "INSERT", 1)],
        [_user(41, "Ines", "Lima", "UPDATE", 1)],  # older: the SCD1 target keeps Quito
        [_user(42, "Tomas", "Cusco", "INSERT", 2), _user(None, "Nul", None, "DELETE", 3)],
    ):
        pipe.feed("users", changes, schema=SCHEMA)
        pipe.step()  # each run passes the guard
    current = [(r["account_id"], r["city"]) for r in pipe.rows("target_scd1", ["account_id"])]
    assert current == [(41, "Quito"), (42, "Cusco")]
    history = pipe.rows("target_scd2", ["account_id", "__START_AT"])
    assert sorted(
        (r["account_id"] or 0, r["city"], r["__START_AT"], r["__END_AT"]) for r in history
    ) == [
        (0, "Nowhere", 1, 3),  # the NULL key's version, closed by its delete
        (41, "Lima", 1, 5),
        (41, "Quito", 5, None),
        (42, "Cusco", 2, None),
    ]


FILES = USERS.replace(
    'lf.source("iot", totalRows=1)  # replaced by the fed batches',
    'lf.read_files(lf.config("t.landing"), "json", schema=SCHEMA).drop("_metadata")',
).replace(
    "import lakefeed as lf\n",
    "import lakefeed as lf\n\nSCHEMA = 'account_id BIGINT, name STRING, city STRING, "
    "operation STRING, change_seq BIGINT'\n",
)


def test_verify_recomputes_both_targets_and_finds_a_damaged_one(spark, tmp_path: Path) -> None:
    """``lakefeed verify`` applies each target's committed changes in one batch with the CDC
    engine and compares: equal after three runs of out-of-order changes, SCD2's validity
    columns included; a row deleted behind the pipeline's back is reported."""
    folder = write(tmp_path / "p", {"users.py": FILES})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    conf = {"t.landing": str(tmp_path / "landing")}
    for number, changes in enumerate(
        (
            [_user(41, "Ines", "Quito", "INSERT", 5), _user(None, "Nul", "Nowhere", "INSERT", 1)],
            [_user(41, "Ines", "Lima", "UPDATE", 1)],
            [_user(42, "Tomas", "Cusco", "INSERT", 2), _user(None, "Nul", None, "DELETE", 3)],
        )
    ):
        lines = "".join(json.dumps(change) + "\n" for change in changes)
        write(tmp_path / "landing", {f"{number}.json": lines})
        assert lf.run(folder, lakehouse=lakehouse, conf=conf, spark=spark, mode="available-now").ok

    check = lf.verify(folder, lakehouse=lakehouse, conf=conf, spark=spark, run_first=False)
    assert check.ok, check.tables
    assert [(t.table, t.stream_rows, t.batch_rows) for t in check.tables] == [
        ("target_scd1", 2, 2),
        ("target_scd2", 4, 4),
    ]
    assert not list(lakehouse.root.glob("_lakefeed_verify*"))  # the recomputed targets are gone

    DeltaTable(str(lakehouse.table_path("target_scd2"))).delete("account_id = 42")
    check = lf.verify(folder, lakehouse=lakehouse, conf=conf, spark=spark, run_first=False)
    assert not check.ok and check.table("target_scd1").equal
    damaged = check.table("target_scd2")
    assert (damaged.only_stream, damaged.only_batch) == (0, 1)
    assert "42" in damaged.samples[0] and "Cusco" in damaged.samples[0]
