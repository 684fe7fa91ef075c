"""Sinks in a pipeline run: a Delta path, a PostgreSQL upsert, a Kafka topic (tansu) and a
``foreach_batch_sink`` fed by one available-now run (shared by the tests here), each exactly
once (Kafka: at least once): a second run with no new input changes nothing. Validation refuses
a flow reading a sink, a batch flow into one and a format Spark cannot write, and shows no
secret of a sink's options."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakefeed as lf
from lakefeed.connectors.kafka.client import BrokerView
from lakefeed.connectors.kafka.consume import read_range
from lakefeed.connectors.kafka.offsets import OffsetRange
from lakefeed.connectors.kafka.options import parse_source_options
from lakefeed.core.errors import DataLossRiskError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline import guard
from lakefeed.runtime.event_log import read_events
from tests.pipeline.support import load, write

# compat: the audit sink's own code writes with pyspark's write.format("delta")
pytestmark = [pytest.mark.kafka, pytest.mark.compat]

PIPELINE = """
import lakefeed as lf
from pyspark.sql import functions as F

lf.create_sink("export", "delta", {"path": lf.config("test.export")})
lf.create_sink("counts", "postgres", {"url": lf.config("test.url"), "dbtable": "device_counts",
                                      "keys": "device_id"})
lf.create_sink("topic", "kafka", {"kafka.bootstrap.servers": lf.config("test.kafka"),
                                  "topic": lf.config("test.topic")})
lf.create_sink("topic_eos", "kafka", {"kafka.bootstrap.servers": lf.config("test.kafka"),
                                      "topic": lf.config("test.topic_eos"),
                                      "lakefeed.deliveryGuarantee": "exactly-once"})


@lf.table
def readings():
    return lf.source("iot", totalRows=40, rowsPerSecond=1000, devices=4, seed=5,
                     startTime="2026-01-01T00:00:00Z", malformedRate=0,
                     duplicateRate=0).select("offset", "device_id")


@lf.append_flow(target="export")
def to_export():
    return lf.read_stream("readings")


@lf.append_flow(target="topic")
def to_topic():
    return lf.read_stream("readings").selectExpr("device_id AS key",
                                                 "CAST(offset AS STRING) AS value")


@lf.append_flow(target="topic_eos")
def to_topic_eos():
    return lf.read_stream("readings").selectExpr("CAST(offset AS STRING) AS value")


@lf.append_flow(target="counts")
def to_counts():
    return lf.read_stream("readings").groupBy("device_id").agg(F.count("*").alias("readings"))


@lf.foreach_batch_sink(name="audit")
def audit(df, batch_id):
    batch = lf.current_batch()  # the flow's query id and this batch: an idempotent append
    (df.withColumn("flow", F.lit(batch.flow)).write.format("delta")
       .option("txnAppId", batch.app_id).option("txnVersion", batch_id)
       .mode("append").save(lf.config("test.audit")))


@lf.append_flow(target="audit")
def to_audit():
    return lf.read_stream("readings").select("offset")
"""

BROKEN = """
import lakefeed as lf

lf.create_sink("out", "no_such_format", {"path": "/tmp/out", "password": "hunter2"})
lf.create_sink("batchy", "delta", {"path": "/tmp/batchy"})


@lf.table
def src():
    return lf.source("iot", totalRows=5)


@lf.append_flow(target="out")
def to_out():
    return lf.read_stream("src")


@lf.append_flow(target="batchy")
def to_batchy():
    return lf.read("src")


@lf.table
def reads_a_sink():
    return lf.read_stream("out")
"""


@pytest.fixture(scope="module")
def runs(
    spark,  # noqa: ANN001
    postgres,  # noqa: ANN001
    broker,  # noqa: ANN001
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """Two available-now runs; what the sinks held after each."""
    root = tmp_path_factory.mktemp("sinks")
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE device_counts (device_id text PRIMARY KEY, readings bigint)")
    topic, topic_eos = broker.create_topic(1), broker.create_topic(1)
    conf = {
        "test.export": str(root / "export"),
        "test.audit": str(root / "audit"),
        "test.url": url,
        "test.kafka": broker.bootstrap,
        "test.topic": topic,
        "test.topic_eos": topic_eos,
    }
    folder = write(root / "p", {"sinks.py": PIPELINE})
    lakehouse = Lakehouse.at(root / "lh")
    seen = []
    for _ in range(2):
        result = lf.run(folder, lakehouse=lakehouse, conf=conf, spark=spark)
        assert result.ok, result
        seen.append(_sinks(root, url, broker.bootstrap, topic))
        seen[-1]["topic_eos"] = sorted(int(v) for v in broker.committed_values(topic_eos))
    plan = lf.plan(folder, lakehouse=lakehouse, conf=conf, spark=spark)
    yield {"seen": seen, "lakehouse": lakehouse, "plan": plan, "folder": folder, "conf": conf}


def _sinks(root: Path, url: str, kafka: str, topic_name: str) -> dict[str, Any]:
    export, audit = DeltaTable(str(root / "export")), DeltaTable(str(root / "audit"))
    with psycopg.connect(url) as conn:
        counts = dict(conn.execute("SELECT device_id, readings FROM device_counts").fetchall())
    options = parse_source_options(
        {"kafka.bootstrap.servers": kafka, "subscribe": topic_name}, batch=True
    )
    view = BrokerView(options)
    try:
        ((_, end),) = view.watermarks(view.partitions()).values()
    finally:
        view.close()
    topic = pa.Table.from_batches(list(read_range(options, OffsetRange(topic_name, 0, 0, end))))
    return {
        "export": sorted(export.to_pyarrow_table()["offset"].to_pylist()),
        "audit": sorted(audit.to_pyarrow_table().to_pylist(), key=lambda r: r["offset"]),
        "counts": counts,
        "topic": sorted(int(v) for v in topic.column("value").to_pylist()),
        "versions": (export.version(), audit.version()),
    }


def test_each_sink_gets_every_row_once(runs: dict[str, Any]) -> None:
    first = runs["seen"][0]
    assert first["export"] == list(range(40))
    assert [r["offset"] for r in first["audit"]] == list(range(40))
    assert {r["flow"] for r in first["audit"]} == {"to_audit"}
    assert sum(first["counts"].values()) == 40 and len(first["counts"]) == 4
    assert first["topic"] == list(range(40))  # at-least-once, and no batch was replayed here
    assert first["topic_eos"] == list(range(40))  # one transaction per batch, read_committed


def test_a_second_run_without_new_input_changes_no_sink(runs: dict[str, Any]) -> None:
    first, second = runs["seen"]
    assert second == first


def test_plan_keeps_the_sink_flows_of_unchanged_code(runs: dict[str, Any]) -> None:
    verdicts = {c.flow: c.verdict.value for c in runs["plan"].flows}
    assert verdicts == dict.fromkeys(
        ("readings", "to_audit", "to_counts", "to_export", "to_topic", "to_topic_eos"), "keep"
    )


def test_a_full_refresh_of_a_table_takes_the_sink_flows_that_read_it(
    runs: dict[str, Any],
) -> None:
    lakehouse: Lakehouse = runs["lakehouse"]
    flows, tables = guard.lakehouse_flows(load([runs["folder"]], runs["conf"]), lakehouse, {})
    guard.check_versions(flows, tables, [])  # nothing behind: the sinks' flows are in step
    with pytest.raises(DataLossRiskError) as error:
        guard.check_versions(flows, tables, ["readings"])
    named = str(error.value).rsplit("--full-refresh ", 1)[1].split("`")[0].split(",")
    assert sorted(named) == ["audit", "counts", "export", "readings", "topic", "topic_eos"]


def test_sinks_are_sinks_in_the_graph_and_the_event_log(runs: dict[str, Any]) -> None:
    lakehouse: Lakehouse = runs["lakehouse"]
    assert sorted(p.name for p in (lakehouse.root / "tables").iterdir()) == ["readings"]
    start = read_events(lakehouse.event_log_path, event_types=["run_start"])[0]
    kinds = {n["name"]: n["kind"] for n in start["details"]["graph"]["nodes"]}
    assert kinds == {"readings": "table"} | dict.fromkeys(
        ("export", "counts", "topic", "topic_eos", "audit"), "sink"
    )
    batches = read_events(lakehouse.event_log_path, event_types=["sink_batch"])
    rows: dict[str, int] = {}
    for event in batches:
        rows[event["details"]["sink"]] = (
            rows.get(event["details"]["sink"], 0) + (event["details"]["rows"])
        )
    assert rows["export"] == rows["audit"] == rows["topic"] == rows["topic_eos"] == 40
    assert rows["counts"] >= 4


def test_misuse_of_sinks_is_refused_at_validate(spark, tmp_path: Path) -> None:  # noqa: ANN001
    folder = write(tmp_path / "p", {"broken.py": BROKEN})
    result = lf.validate(folder, lakehouse=tmp_path / "lh", spark=spark)
    problems = "\n".join(result.problems)
    assert "[LAKEFEED:SINK_FORMAT]" in problems and "'no_such_format'" in problems
    assert "[LAKEFEED:SINK_FLOW]" in problems and "'to_batchy'" in problems
    assert "[LAKEFEED:SINK_READ]" in problems and "'reads_a_sink' reads 'out'" in problems
    document = json.dumps(result.to_dict())
    assert "hunter2" not in document
    (out,) = [d for d in result.to_dict()["datasets"] if d["name"] == "out"]
    assert out["kind"] == "sink" and out["sink"]["options"]["password"] == "***"
