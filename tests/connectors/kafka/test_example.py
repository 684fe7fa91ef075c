"""examples/kafka_ingest end to end: generator → topic → bronze Delta → silver, lag recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from lakefeed import load_pipeline
from lakefeed.connectors.generator.iot import IotConfig
from lakefeed.connectors.kafka.feed import Feeder
from lakefeed.connectors.kafka.lag import lag_from_progress
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import set_config
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.connectors.kafka.broker import Tansu
from tests.support.delta import table

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "kafka_ingest"


def test_kafka_ingest_example_runs_end_to_end(spark: Any, broker: Tansu, tmp_path: Path) -> None:
    topic = broker.create_topic(3)
    feeder = Feeder(
        {"bootstrap.servers": broker.bootstrap},
        topic,
        IotConfig(rows_per_second=1_000_000, total_rows=2000, devices=10, seed=5),
    )
    assert feeder.run() == 2000
    conf = {"kafka.bootstrap": broker.bootstrap, "kafka.topic": topic}
    set_config({**conf, "kafka.maxOffsetsPerTrigger": "800"})  # read when flows are evaluated
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    try:
        pipeline = load_pipeline([EXAMPLE])
        options = RunOptions(mode="available-now")
        result = PipelineRunner(pipeline, lakehouse, spark, options).run()
    finally:
        set_config({})
    assert result.ok, result

    bronze = table(lakehouse, "bronze_kafka")
    assert bronze.num_rows == 2000
    offsets = {
        (p, o)
        for p, o in zip(bronze["partition"].to_pylist(), bronze["offset"].to_pylist(), strict=True)
    }
    assert len(offsets) == 2000
    silver = table(lakehouse, "silver_readings")
    quarantine = table(lakehouse, "silver_readings_quarantine")
    assert quarantine.num_rows > 0 and 0 < silver.num_rows < 2000
    assert pc.count_distinct(silver["event_id"]).as_py() == silver.num_rows

    progress = read_events(
        lakehouse.event_log_path, event_types=["flow_progress"], flow="bronze_kafka"
    )
    lags = [lag_from_progress(e["details"]["sources"][0]) for e in progress]
    lags = [lag for lag in lags if lag is not None]
    assert lags, "no Kafka lag in the event log"
    assert lags[0]["total"] > 0 and lags[-1]["total"] == 0
    assert set(lags[-1]["partitions"]) == {f"{topic}-{p}" for p in range(3)}
