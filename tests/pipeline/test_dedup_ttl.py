"""``lf.drop_duplicates_within_ttl``: a key's first row once while its TTL lasts, across
restarts; once the TTL has passed the key counts as new. One pipeline, two runs on the same
checkpoints, two tables over the same files: a TTL longer than the test (nothing expires) and a
TTL of one second (run 2 starts seconds after run 1: every key of run 1 has expired)."""

from __future__ import annotations

import pytest

import lakefeed as lf
from lakefeed.errors import PipelineDefinitionError
from lakefeed.pipeline.dedup import _ttl_ms, drop_duplicates_within_ttl
from tests.pipeline.support import table, write

PIPELINE = """
import lakefeed as lf

def events():
    files = lf.read_files(lf.config("t.landing"), "json", schema="id BIGINT, v STRING")
    return files.drop("_metadata")

@lf.table
def unique_events():
    return lf.drop_duplicates_within_ttl(events(), ["id"], "1 day")

@lf.table
def short_lived():
    return lf.drop_duplicates_within_ttl(events(), ["id"], "1 second")
"""


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    """Run 1 over ids 1, 1, 2; run 2 (a new run on the same checkpoints) over ids 2, 3."""
    root = tmp_path_factory.mktemp("dedup_ttl")
    flows = write(root / "flows", {"pipeline.py": PIPELINE}) / "pipeline.py"
    landing = root / "landing"
    conf = {"t.landing": str(landing)}
    batches = [
        {"a.json": '{"id": 1, "v": "a"}\n{"id": 1, "v": "b"}\n{"id": 2, "v": "c"}\n'},
        {"b.json": '{"id": 2, "v": "d"}\n{"id": 3, "v": "e"}\n'},
    ]
    for files in batches:
        write(landing, files)
        result = lf.run(flows, lakehouse=root / "lh", mode="available-now", conf=conf, spark=spark)
        assert result.ok, result.errors
    lakehouse = lf.Lakehouse.at(root / "lh")
    return {
        name: sorted(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
        for name in ("unique_events", "short_lived")
        for t in [table(lakehouse, name)]
    }


@pytest.mark.spark
def test_a_key_passes_once_within_its_ttl_across_a_restart(runs) -> None:
    rows = runs["unique_events"]
    assert [key for key, _ in rows] == [1, 2, 3]  # id 2 of run 2 dropped after the restart
    assert dict(rows)[1] in ("a", "b") and dict(rows)[2] == "c"


@pytest.mark.spark
def test_a_key_passes_again_once_its_ttl_has_passed(runs) -> None:
    assert [key for key, _ in runs["short_lived"]] == [1, 2, 2, 3]  # id 2 expired, new again
    assert (2, "d") in runs["short_lived"]


@pytest.mark.spark
def test_the_runs_close_their_state_stores(runs, spark) -> None:
    """lf.run closes the stopped queries' RocksDB stores (state_memory.release) instead of
    leaving them open until Spark's maintenance task, which release stops with them."""
    store = spark._jvm.org.apache.spark.sql.execution.streaming.state.StateStore
    assert not store.isMaintenanceRunning()


@pytest.mark.spark
def test_misuse_is_refused_with_the_fix(spark) -> None:
    df = spark.createDataFrame([(1, "a")], "id BIGINT, v STRING")
    with pytest.raises(PipelineDefinitionError, match="no column 'key'"):
        drop_duplicates_within_ttl(df, ["key"], "1 day")
    with pytest.raises(PipelineDefinitionError, match="list of key columns"):
        drop_duplicates_within_ttl(df, "id", "1 day")


def test_ttl_is_a_positive_spark_duration() -> None:
    assert _ttl_ms("1 day") == 86_400_000
    assert _ttl_ms("1 hour 30 minutes") == 5_400_000
    for bad in ("soon", "0 seconds", ""):
        with pytest.raises(PipelineDefinitionError, match="not a positive duration"):
            _ttl_ms(bad)


def test_the_public_name_is_lakefeeds() -> None:
    assert lf.drop_duplicates_within_ttl is drop_duplicates_within_ttl
