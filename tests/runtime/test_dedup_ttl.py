"""``lf.drop_duplicates_within_ttl``: a key's first row once while its TTL lasts, across
restarts; once the TTL has passed the key counts as new. One pipeline, two runs on the same
checkpoints, two tables over the same files: a TTL longer than the test (nothing expires) and a
TTL of one second (run 2 starts seconds after run 1: every key of run 1 has expired). Its state
is Avro-encoded, and a checkpoint begun in UnsafeRow (lakefeed before that choice) keeps it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import lakefeed as lf
from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.pipeline.dedup import _ttl_ms, drop_duplicates_within_ttl
from lakefeed.pipeline.output_modes import PlanFacts
from lakefeed.runtime import query_start
from lakefeed.runtime.evaluate import plan_facts
from lakefeed.runtime.query_start import STATE_ENCODING
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


FIRST = [
    '{"id": 1, "v": "a"}',
    '{"id": 1, "v": "b"}',
    '{"id": 2, "v": "c"}',
    '{"v": "n"}',
    '{"v": "m"}',
]
BATCHES = [  # a null key is a key: its first row passes, as with Spark's dedup
    {"a.json": "\n".join(FIRST)},
    {"b.json": '{"id": 2, "v": "d"}\n{"id": 3, "v": "e"}\n'},
]
TABLES = ("unique_events", "short_lived")


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    """Run 1 over ids 1, 1, 2, null, null; run 2 (a new run on the same checkpoints) over ids
    2, 3."""
    return _two_runs(spark, tmp_path_factory.mktemp("dedup_ttl"), PIPELINE, TABLES)


def _two_runs(
    spark: SparkSession,
    root: Path,
    pipeline: str,
    tables: tuple[str, ...],
    first: Callable[[], AbstractContextManager[None]] | None = None,
) -> dict:
    """Rows of ``tables`` after the two runs (``first``: a context for run 1), and the state
    encoding each checkpoint's offset log recorded (under ``encoding:`` + table)."""
    flows = write(root / "flows", {"pipeline.py": pipeline}) / "pipeline.py"
    landing = root / "landing"
    conf = {"t.landing": str(landing)}
    for index, files in enumerate(BATCHES):
        write(landing, files)
        with first() if first and not index else nullcontext():
            result = lf.run(
                flows, lakehouse=root / "lh", mode="available-now", conf=conf, spark=spark
            )
        assert result.ok, result.errors
    lakehouse = lf.Lakehouse.at(root / "lh")
    found: dict = {
        name: sorted(
            zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True),
            key=_nulls_first,
        )
        for name in tables
        for t in [table(lakehouse, name)]
    }
    for name in tables:
        last = max(
            Path(lakehouse.checkpoint_path(name), "offsets").glob("[0-9]*"),
            key=lambda p: int(p.name),
        )
        metadata = json.loads(last.read_text().splitlines()[1])
        found["encoding:" + name] = metadata["conf"][STATE_ENCODING]
    return found


def _nulls_first(row: tuple[int | None, str]) -> tuple[bool, int, str]:
    return row[0] is not None, row[0] or 0, row[1]


@pytest.mark.spark
def test_a_key_passes_once_within_its_ttl_across_a_restart(runs) -> None:
    rows = runs["unique_events"]
    assert [key for key, _ in rows] == [None, 1, 2, 3]  # id 2 of run 2 dropped after the restart
    assert dict(rows)[1] in ("a", "b") and dict(rows)[2] == "c"


@pytest.mark.spark
def test_a_key_passes_again_once_its_ttl_has_passed(runs) -> None:
    assert [key for key, _ in runs["short_lived"]] == [None, 1, 2, 2, 3]  # 2 expired, new again
    assert (2, "d") in runs["short_lived"]


@pytest.mark.spark
def test_the_state_is_avro_encoded(runs) -> None:
    """Avro: 28 bytes a key against 89 as UnsafeRows (lakefeed.runtime.query_start)."""
    assert [runs["encoding:" + name] for name in TABLES] == ["avro", "avro"]


@pytest.mark.spark
def test_sparks_avro_nullability_warning_is_silenced(runs, spark) -> None:
    """Spark warns at each store's encoders that the (non-nullable on purpose) key schema is
    not nullable: once Avro was chosen, that logger says errors only."""
    logger = spark._jvm.org.apache.logging.log4j.LogManager.getLogger(query_start.AVRO_SERIALIZER)
    assert logger.getLevel().toString() == "ERROR"


@pytest.mark.spark
def test_a_checkpoint_begun_in_unsaferow_keeps_it(spark, tmp_path) -> None:
    """A TTL dedup started before lakefeed chose Avro: the offset log pins UnsafeRow, the next
    run (which asks for Avro) resumes it, and the keys of run 1 are still remembered."""
    pipeline = PIPELINE.split("@lf.table\ndef short_lived")[0]
    found = _two_runs(spark, tmp_path, pipeline, ("unique_events",), first=_without_avro)
    assert [key for key, _ in found["unique_events"]] == [None, 1, 2, 3]
    assert found["encoding:unique_events"] == "unsaferow"


@contextmanager
def _without_avro() -> Iterator[None]:
    """Runs meanwhile start their flows as lakefeed did before it chose Avro."""
    chosen = query_start.settings

    def settings(facts: PlanFacts, trigger: dict) -> dict[str, str]:
        return {k: v for k, v in chosen(facts, trigger).items() if k != STATE_ENCODING}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(query_start, "settings", settings)
        yield


@pytest.mark.spark
def test_avro_only_when_the_ttl_dedup_is_the_only_state(spark) -> None:
    """Spark refuses Avro state for its own operators: a TTL dedup followed by an aggregation
    keeps Spark's encoding."""
    stream = spark.readStream.format("rate").load().selectExpr("value AS id", "timestamp AS ts")
    deduped = drop_duplicates_within_ttl(stream, ["id"], "1 day")
    assert plan_facts(deduped).state_encoding == "avro"
    assert plan_facts(deduped.groupBy("id").count()).state_encoding is None
    assert plan_facts(stream.dropDuplicates(["id"])).state_encoding is None
    trigger = {"availableNow": True}
    assert query_start.settings(plan_facts(deduped), trigger) == {
        query_start.NO_DATA_BATCHES: "false",
        STATE_ENCODING: "avro",
    }


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
