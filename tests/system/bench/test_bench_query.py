"""The shared YSB query's plan (a Spark session, no job: the optimized plan is read)."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench.ysb import query


def test_a_kafka_value_is_parsed_once_per_row(spark: SparkSession, tmp_path: Path) -> None:
    """The latency query's filter and the join's inferred ``isnotnull`` must not each re-parse
    the JSON value (they did: four ``from_json`` per view row)."""
    (tmp_path / "campaigns.json").write_text('{"ad_id": "a", "campaign_id": "c"}\n')
    value = json.dumps({"ad_id": "a", "event_type": "view", "event_time": "1"}).encode()
    raw = spark.createDataFrame([(value,)], "value binary")
    events = raw.select(*query.parse_value(F.col("value")))
    views = query.views(events, query.campaigns_frame(spark, str(tmp_path / "campaigns.json")))
    plan = views._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("from_json(") == 1
