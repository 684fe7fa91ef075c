"""AUTO CDC in a pipeline run: targets of one randomized change stream against the model.

The pipeline mixes lakefeed's API (``changes.py``), an unchanged DLT file (``dlt_cdc.py``,
``dlt.apply_changes`` with Columns) and SQL (``cdc.sql``: ``APPLY CHANGES INTO`` and ``CREATE
FLOW ... AS AUTO CDC INTO``). Several seeds share one stream (each seed its own keys) and one
run: three fed batches, each its own micro-batch, so late changes meet what earlier batches wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import types as T

import lakefeed as lf
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.kinds import RunMode
from lakefeed.testing import PipelineTest
from tests.cdc import model

PIPELINE = Path(__file__).parent / "pipelines"
SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("seq", T.LongType()),
        T.StructField("op", T.StringType()),
        T.StructField("a", T.LongType()),
        T.StructField("b", T.StringType()),
    ]
)
SEEDS = (1, 2, 3)


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory: pytest.TempPathFactory) -> tuple[PipelineTest, list[list[dict]]]:
    streams = [model.changes(seed) for seed in SEEDS]
    batches = [[c for stream in streams for c in stream[i]] for i in range(len(streams[0]))]
    pipe = PipelineTest(PIPELINE, tmp_path_factory.mktemp("cdc"), spark=spark)
    for batch in batches:
        pipe.feed("changes", batch, schema=SCHEMA)
    pipe.step()
    return pipe, batches


@pytest.mark.parametrize("table", ["customers", "customers_sql"])
def test_scd1_target_matches_the_model(run, table: str) -> None:
    pipe, batches = run
    assert pipe.rows(table, ["id"]) == model.scd1(batches)


def test_scd1_ignoring_null_updates_matches_the_model(run) -> None:
    pipe, batches = run
    assert pipe.rows("customers_patched", ["id"]) == model.scd1(batches, ignore_null_updates=True)


def test_scd2_history_matches_the_model(run) -> None:
    pipe, batches = run
    history = pipe.rows("customers_history", ["id", "__START_AT"])
    assert history == model.scd2(batches)
    assert any(r["__END_AT"] is not None for r in history)  # closed versions are there


def test_backfill_rebuilds_the_targets_from_all_changes(run, spark, tmp_path: Path) -> None:
    pipe, batches = run
    lakehouse = Lakehouse.at(tmp_path / "backfilled")
    result = lf.run(pipe.pipeline, lakehouse=lakehouse, spark=spark, mode=RunMode.BACKFILL)
    assert result.ok, result
    everything = [[c for batch in batches for c in batch]]  # one batch: nothing arrives late
    assert model.rows(lakehouse, "customers", ["id"]) == model.scd1(everything)
    history = model.rows(lakehouse, "customers_history", ["id", "__START_AT"])
    assert history == model.scd2(batches)
