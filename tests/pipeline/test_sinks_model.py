"""Sinks as declared (``lf.create_sink``, ``@lf.foreach_batch_sink``, DLT's and SDP's spellings)
and the misuse refused before Spark starts: Spark-free, milliseconds each."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.output_modes import PlanFacts
from lakefeed.pipeline.sinks import Sink, current_batch, output_mode
from tests.pipeline.support import load, write

SOURCE = 'lf.source("iot", totalRows=10).select("value")'
SINKS = f"""
import lakefeed as lf

lf.create_sink("alerts", "kafka", {{"kafka.bootstrap.servers": "127.0.0.1:9092",
    "topic": "alerts", "kafka.sasl.jaas.config":
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
    'password="hunter2";'}})
lf.create_sink("shop", "postgres", {{"url": "postgresql://app:hunter2@db/shop",
    "dbtable": "public.readings", "keys": "id"}})

@lf.append_flow(target="alerts")
def to_alerts():
    return {SOURCE}

@lf.append_flow(target="shop")
def to_shop():
    return {SOURCE}

@lf.foreach_batch_sink
def audit(df, batch_id):
    pass

@lf.append_flow(target="audit")
def to_audit():
    return {SOURCE}
"""


def _load(tmp_path: Path, text: str, name: str = "p.py"):  # noqa: ANN202
    return load([write(tmp_path / "p", {name: text})])


def _problems(tmp_path: Path, text: str, name: str = "p.py") -> str:
    with pytest.raises(PipelineError) as error:
        _load(tmp_path, text, name)
    return "\n".join(error.value.problems)


def test_sinks_are_datasets_of_their_own_kind_filled_by_append_flows(tmp_path: Path) -> None:
    pipeline = _load(tmp_path, SINKS)
    datasets = pipeline.datasets.items()
    kinds = {name: (d.kind, d.sink.kind if d.sink else None) for name, d in datasets}
    assert kinds == {
        "alerts": ("sink", "kafka"),
        "shop": ("sink", "postgres"),
        "audit": ("sink", "foreach_batch"),
    }
    assert not any(d.stored for d in pipeline.datasets.values())  # nothing in the lakehouse
    assert pipeline.flow_names(pipeline.datasets["audit"]) == ["to_audit"]
    shop = pipeline.datasets["shop"].sink
    assert shop is not None and shop.keys == ["id"] and shop.upserts
    # secrets never leave: not in the description, the shown options or a repr
    shown = " ".join(
        f"{d.sink.describe()} {d.sink.shown_options} {d.sink!r}"
        for d in pipeline.datasets.values()
        if d.sink is not None
    )
    assert "hunter2" not in shown and "PostgreSQL postgresql://app:***@db/shop" in shown


@pytest.mark.parametrize(
    ("declaration", "code", "words"),
    [
        ('lf.create_sink("s", "iot")', "SINK_FORMAT", "is a lakefeed source, not a sink"),
        ('lf.create_sink("s", "kafka", {"topic": "t"})', "SINK_OPTION", "bootstrap.servers"),
        ('lf.create_sink("s", "delta")', "SINK_OPTION", "exactly one of the options path"),
        ('lf.create_sink("s", "parquet")', "SINK_OPTION", "needs the option path"),
        ('lf.create_sink("s", "postgres", {"url": "postgresql://db"})', "SINK_OPTION", "dbtable"),
        ('lf.create_sink("s", "delta", {"tableName": "t"})', "SINK_FLOW", "a dataset of this"),
    ],
)
def test_a_sink_declared_wrong_is_refused_with_its_code(
    tmp_path: Path, declaration: str, code: str, words: str
) -> None:
    text = f"""
import lakefeed as lf
{declaration}

@lf.table
def t():
    return {SOURCE}

@lf.append_flow(target="s")
def into():
    return {SOURCE}
"""
    problems = _problems(tmp_path, text)
    assert f"[LAKEFEED:{code}]" in problems and words in problems and "fix:" in problems


def test_only_streaming_append_flows_write_a_sink(tmp_path: Path) -> None:
    text = f"""
import lakefeed as lf
lf.create_sink("s", "delta", {{"path": "/tmp/x"}})
lf.create_sink("unused", "parquet", {{"path": "/tmp/y"}})

@lf.view
def changes():
    return {SOURCE}

@lf.append_flow(target="s", once=True)
def backfill():
    return {SOURCE}

lf.create_auto_cdc_flow(target="s", source="changes", keys=["value"], sequence_by="value")
"""
    problems = _problems(tmp_path, text)
    assert "'backfill'" in problems and "once=True" in problems
    assert "AUTO CDC flow 's_cdc'" in problems and "[LAKEFEED:SINK_FLOW]" in problems
    assert "sink 'unused'" in problems and "has no flow" in problems


def test_output_modes_a_sink_takes() -> None:
    kafka = Sink("kafka", {"kafka.bootstrap.servers": "h:1", "topic": "t"})
    upsert = Sink("postgres", {"url": "postgresql://db", "dbtable": "t", "keys": "id"})
    appended = PlanFacts(streaming=True)
    grouped = PlanFacts(streaming=True, aggregate=True)
    windows = PlanFacts(streaming=True, aggregate=True, watermark=True)
    assert output_mode("f", kafka, appended).mode == "append"
    assert output_mode("f", kafka, windows).mode == "append"
    assert output_mode("f", upsert, grouped).mode == "update"
    refused = output_mode("f", kafka, grouped)
    assert refused.mode is None and "SINK_FLOW" in refused.problems[0]
    batch = output_mode("f", kafka, PlanFacts(streaming=False))
    assert batch.mode is None and "batch DataFrame" in batch.problems[0]


def test_dlt_and_sdp_sinks_declare_lakefeed_sinks(tmp_path: Path) -> None:
    dlt = """
import dlt
dlt.create_sink(name="out", format="delta", options={"path": "/tmp/out"})

@dlt.foreach_batch_sink(name="each")
def handler(df, batch_id):
    pass

@dlt.append_flow(target="out")
def a():
    return dlt.read_stream("src")

@dlt.append_flow(target="each")
def b():
    return dlt.read_stream("src")

@dlt.table
def src():
    return spark.readStream.format("rate").load()
"""
    pipeline = _load(tmp_path / "dlt", dlt)
    assert pipeline.datasets["out"].kind == "sink" and pipeline.datasets["each"].kind == "sink"
    assert pipeline.flow_names(pipeline.datasets["each"]) == ["b"]
    sdp = """
from pyspark import pipelines as dp
dp.create_sink("out", "parquet", {"path": "/tmp/out"})

@dp.append_flow(target="out")
def a():
    return spark.readStream.format("rate").load()
"""
    pipeline = _load(tmp_path / "sdp", sdp)
    out = pipeline.datasets["out"]
    assert out.kind == "sink" and out.sink is not None and out.sink.kind == "spark"
    assert pipeline.flow_names(out) == ["a"]


def test_current_batch_is_known_only_inside_a_sink_function() -> None:
    with pytest.raises(Exception, match="SINK_FLOW"):
        current_batch()
