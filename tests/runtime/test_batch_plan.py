"""A batch evaluation gives ``dropDuplicatesWithinWatermark`` its batch meaning in the flow's own
plan, without swapping any pyspark method (continuous flows run in other threads meanwhile)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import Dataset, Pipeline
from lakefeed.runtime.evaluate import Evaluator


def test_batch_evaluation_rewrites_the_plan_not_the_class(spark, tmp_path: Path) -> None:
    original = DataFrame.dropDuplicatesWithinWatermark
    seen: list[object] = []

    def readings() -> DataFrame:
        seen.append(DataFrame.dropDuplicatesWithinWatermark)
        rows = [(1, "a", "2026-01-01 00:00:00"), (1, "a", "2026-01-01 00:00:01"), (2, "b", None)]
        frame = spark.createDataFrame(rows, "id int, v string, at string")
        return (
            frame.selectExpr("id", "v", "cast(at as timestamp) at")
            .withWatermark("at", "1 minute")
            .dropDuplicatesWithinWatermark(["id"])
            .where("id > 0")
        )

    pipeline = Pipeline("dedup")
    pipeline.add(Dataset("readings", "table", readings))
    evaluator = Evaluator(spark, pipeline, Lakehouse.at(tmp_path / "lh"), mode="batch")
    frame = evaluator.evaluate("readings")

    assert seen == [original]  # the class was never patched while the flow ran
    assert DataFrame.dropDuplicatesWithinWatermark is original
    assert frame is not None and not frame.isStreaming
    assert sorted(r.id for r in frame.collect()) == [1, 2]
    plan = frame._jdf.queryExecution().analyzed().toString()
    assert "DeduplicateWithinWatermark" not in plan and "Deduplicate" in plan


def test_batch_plan_keeps_a_frame_without_streaming_operators(spark) -> None:
    from lakefeed.runtime.evaluate import batch_plan

    frame = spark.range(3)
    assert batch_plan(frame) is frame
