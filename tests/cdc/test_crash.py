"""kill -9 of ``lakefeed run`` while an AUTO CDC flow applies a change stream, restart: the
SCD1 target equals the model of every change applied once (each MERGE carries the flow's txn; a
kill between the target's and the state table's MERGE is replayed into the same rows). SCD2
shares the machinery; the pipeline test covers its semantics."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakefeed.core.lakehouse import Lakehouse
from tests.cdc import model
from tests.support.crash import run_cli_with_kills, spark_commits

PIPELINE = Path(__file__).parent / "pipelines_crash.py"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("seq", pa.int64()),
        ("op", pa.string()),
        ("a", pa.int64()),
        ("b", pa.string()),
    ]
)


@pytest.mark.crash
@pytest.mark.timeout(900)
def test_kill9_mid_stream_applies_every_change_once(tmp_path: Path) -> None:
    batches = model.changes(seed=11, keys=8, per_key=5, batches=5)
    changes = tmp_path / "changes"
    for batch in batches:  # one commit, one file: one micro-batch each, also after a restart
        write_deltalake(str(changes), pa.Table.from_pylist(batch, schema=SCHEMA), mode="append")
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    args = ["run", str(PIPELINE), "--lakehouse", str(lakehouse.root), "--master", "local[2]"]
    args += ["--trigger-interval", "1 second", "--conf", f"cdc.changes={changes}"]
    watched = lakehouse.checkpoint_path("customers_cdc")
    report = run_cli_with_kills(tmp_path, args, kill_when=lambda _: spark_commits(watched) >= 2)
    assert report.kills == 1
    assert model.rows(lakehouse, "customers", ["id"]) == model.scd1(batches)
