"""examples/kafka_ingest, then ``lakefeed verify``: the batch side reads exactly the offsets the
stream committed per partition, not what was produced since, also after a kill -9 mid-stream."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from lakefeed import load_pipeline
from lakefeed.connectors.generator.iot import IotConfig
from lakefeed.connectors.kafka.feed import Feeder
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.api import set_config
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from tests.connectors.kafka.broker import Tansu
from tests.support.crash import run_cli_with_kills
from tests.support.verify import assert_verify_passes, commits, conf_args

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "kafka_ingest"


def _feed(broker: Tansu, topic: str, rows: int, seed: int) -> None:
    config = IotConfig(rows_per_second=1_000_000, total_rows=rows, devices=10, seed=seed)
    assert Feeder({"bootstrap.servers": broker.bootstrap}, topic, config).run() == rows


def _bronze(lakehouse: Lakehouse):  # noqa: ANN202 - a pyarrow Table
    return DeltaTable(str(lakehouse.table_path("bronze_kafka"))).to_pyarrow_table()


def test_verify_reads_only_the_committed_offsets(spark, broker: Tansu, tmp_path: Path) -> None:
    topic = broker.create_topic(3)
    _feed(broker, topic, 2000, seed=5)
    conf = {"kafka.bootstrap": broker.bootstrap, "kafka.topic": topic}
    set_config({**conf, "kafka.maxOffsetsPerTrigger": "800"})
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    try:
        pipeline = load_pipeline([EXAMPLE])
        result = PipelineRunner(pipeline, lakehouse, spark, RunOptions("available-now")).run()
    finally:
        set_config({})
    assert result.ok, result
    assert _bronze(lakehouse).num_rows == 2000
    _feed(broker, topic, 500, seed=6)  # produced after the run: no checkpoint has them
    assert_verify_passes(EXAMPLE, lakehouse, conf)


@pytest.mark.crash
@pytest.mark.soak  # a second Kafka crash: CI's are test_crash and test_exactly_once
@pytest.mark.timeout(1800)
def test_kill9_mid_stream_restart_then_verify_passes(spark, broker: Tansu, tmp_path: Path) -> None:
    topic = broker.create_topic(3)
    _feed(broker, topic, 3000, seed=7)
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    conf = {
        "kafka.bootstrap": broker.bootstrap,
        "kafka.topic": topic,
        "kafka.maxOffsetsPerTrigger": "500",
    }
    args = ["run", str(EXAMPLE), "--lakehouse", str(lakehouse.root), "--master", "local[2]"]
    bronze = lakehouse.checkpoint_path("bronze_kafka")
    report = run_cli_with_kills(
        tmp_path,
        [*args, *conf_args(conf)],
        kills=1,
        kill_when=lambda _: commits(bronze) >= 2,  # mid-topic: 1000 of 3000 offsets in
        min_delay=240,
        max_delay=300,
        final_timeout=900,
    )
    assert report.kills == 1
    table = _bronze(lakehouse)
    keys = pc.binary_join_element_wise(
        pc.cast(table["partition"], "string"), pc.cast(table["offset"], "string"), ":"
    )
    assert table.num_rows == 3000 and pc.count_distinct(keys).as_py() == 3000
    _feed(broker, topic, 500, seed=8)
    assert_verify_passes(EXAMPLE, lakehouse, conf)
