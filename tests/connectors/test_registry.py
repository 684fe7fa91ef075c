"""The connector registry: every caller finds a connector by format or friendly name, and asks it
for defaults, events, figures and names instead of comparing format strings."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefeed.connectors import registry
from lakefeed.core.errors import LakefeedError
from lakefeed.observe.figures import batch_figures


def test_connectors_by_format_and_alias_any_case() -> None:
    assert [c.name for c in registry.connectors()] == [
        "delta",
        "kafka",
        "files",
        "generator",
        "postgres",
    ]
    assert registry.find("cloudfiles") is registry.find("FILES") is registry.find("cloudFiles")
    assert registry.source_format("iot") == registry.source_format("generator") == "lakefeed_iot"
    assert registry.source_format("Kafka") == "lakefeed_kafka"
    assert registry.source_format("files") == "cloudFiles"
    assert registry.source_format("delta") == "delta"
    assert registry.find("parquet") is None and registry.source_format("parquet") == "parquet"


def test_sink_sides_by_format_and_alias_any_case() -> None:
    writers = {c.name for c in registry.connectors() if c.sink is not None}
    assert registry.sink_names() == ["delta", "kafka", "postgres"] and writers == {
        "delta",
        "kafka",
        "postgres",
    }
    for connector in registry.connectors():
        for name in (*connector.formats, *connector.aliases):
            assert registry.sink_for(name) is registry.sink_for(name.upper()) is connector.sink
    for spark_format in ("parquet", "console", "nosuch"):  # Spark's writer, not a connector's
        assert registry.sink_for(spark_format) is None


def test_a_sink_side_checks_names_and_keys_its_options_without_spark() -> None:
    kafka, delta, postgres = (registry.sink_for(n) for n in ("kafka", "delta", "postgresql"))
    assert kafka is not None and delta is not None and postgres is not None
    shop = {"URL": "postgresql://app:pw@db/shop", "dbtable": "public.c", "Keys": "id, region"}
    postgres.check(shop)
    assert postgres.keys(shop) == ["id", "region"] and delta.keys({"path": "/t"}) == []
    assert postgres.describe(shop) == "PostgreSQL postgresql://app:***@db/shop table public.c"
    assert kafka.describe({"TOPIC": "alerts"}) == "Kafka topic alerts"
    assert delta.table({"TableName": "s.out"}) == "s.out" and delta.table({"path": "/t"}) is None
    for sink, options in [(delta, {}), (postgres, {"url": "x"}), (kafka, {"topic": "t"})]:
        with pytest.raises(LakefeedError) as refused:
            sink.check(options)
        assert refused.value.fix


def test_session_settings_come_from_the_connectors() -> None:
    conf = registry.session_conf()
    assert conf["spark.sql.python.filterPushdown.enabled"] == "true"
    assert conf["spark.sql.parquet.outputTimestampType"] == "TIMESTAMP_MICROS"


def test_delta_spark_session_settings_go_when_delta_spark_is_absent() -> None:
    """The session setup docs.delta.io documents names delta-spark's extension and catalog:
    without its jar (none supports Spark 4.3) they would break the session, so lakefeed drops
    them."""
    docs = {
        "spark.app.name": "registry-test",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }
    assert registry.without_foreign_conf(docs) == {"spark.app.name": "registry-test"}
    mine = {"spark.sql.extensions": "com.example.Ext, io.delta.sql.DeltaSparkSessionExtension"}
    assert registry.without_foreign_conf(mine) == {"spark.sql.extensions": "com.example.Ext"}
    jar = {**docs, "spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0"}
    assert registry.without_foreign_conf(jar) == jar  # delta-spark asked for: its own settings


def test_files_default_its_schema_location_unless_given() -> None:
    files = registry.find("files")
    assert files is not None
    assert files.pipeline_defaults("/lh/_schemas/f", {}) == {
        "cloudFiles.schemaLocation": "/lh/_schemas/f"
    }
    assert files.pipeline_defaults("/lh/_schemas/f", {"cloudfiles.schemalocation": "/x"}) == {}
    kafka = registry.find("kafka")
    assert kafka is not None and kafka.pipeline_defaults("/lh", {}) == {}


def test_sources_are_named_by_what_they_are() -> None:
    assert registry.describe("lakefeed_kafka", {"subscribe": "a, b"}) == "Kafka topics a, b"
    assert registry.describe("lakefeed_kafka", {"subscribePattern": "o.*"}) == (
        "Kafka topics matching o.*"
    )
    assert registry.describe("cloudFiles", {"path": "/in"}) == "landing folder /in"
    assert registry.describe("delta", {"path": "/t"}) == "Delta table /t"
    assert registry.describe("lakefeed_iot", {"rowsPerSecond": "5"}) == "IoT generator (5 rows/s)"
    assert registry.describe("parquet", {"path": "/p"}) == "parquet /p"


def test_kafka_lag_is_a_progress_figure_of_the_kafka_connector() -> None:
    source = {
        "description": "PythonMicroBatchStreamWithTriggerAvailableNow@1",
        "endOffset": {"orders": {"0": 5, "1": 7}},
        "latestOffset": {"orders": {"0": 9, "1": 7}},
    }
    assert registry.progress_figures(source) == {"kafka_lag": 4}
    assert registry.progress_figures({"description": "DeltaSource[/t]"}) == {}
    progress = {"timestamp": "2026-01-01T00:00:00.000Z", "sources": [source, source]}
    figures = batch_figures(progress, None)
    assert figures is not None and figures.kafka_lag is None  # no lag function: none
    from lakefeed.observe.figures import connector_lag

    figures = batch_figures(progress, connector_lag)
    assert figures is not None and figures.kafka_lag == 8


def test_skipped_files_are_batch_events_of_the_files_connector(tmp_path: Path) -> None:
    from lakefeed.connectors.files.filelog import skipped_dir

    location = tmp_path / "schema"
    folder = skipped_dir(str(location))
    folder.mkdir(parents=True)
    (folder / "a.json").write_text('{"path": "/in/a.json", "error": "truncated"}')
    options = {"cloudFiles.schemaLocation": str(location), "path": "/in"}
    sources = [("cloudFiles", options), ("lakefeed_kafka", {"subscribe": "t"})]
    events = list(registry.batch_events("bronze", sources))
    assert [(e.kind, e.level, e.details["path"]) for e in events] == [
        ("file_skipped", "WARN", "/in/a.json")
    ]
    assert "bronze: skipped unreadable file /in/a.json" in events[0].message
    assert list(registry.batch_events("bronze", sources)) == []  # each record claimed once


def test_the_ui_names_a_flows_sources_as_the_runtime_did() -> None:
    from lakefeed.observe.figures import Monitor
    from lakefeed.observe.graph import with_sources

    start = {
        "pipeline": "p",
        "run_id": "r",
        "flow": "bronze",
        "event_type": "flow_start",
        "timestamp": "2026-01-01T00:00:00+00:00",
        "details": {"target": "bronze", "sources": ["Kafka topics orders"]},
    }
    python_source = {"description": "org.apache.spark.sql.x.PythonMicroBatchStream@1f"}
    progress = {
        **start,
        "event_type": "flow_progress",
        "details": {"timestamp": "2026-01-01T00:00:01.000Z", "sources": [python_source]},
    }
    monitor = Monitor()
    monitor.apply_all([start, progress])
    (flow,) = monitor.snapshot(0.0)["pipelines"][0]["flows"]
    assert flow["sources"] == ["Kafka topics orders"]
    graph = with_sources(
        {"nodes": [{"name": "bronze", "kind": "table"}], "edges": []}, {"bronze": flow["sources"]}
    )
    assert ["Kafka topics orders", "bronze"] in graph["edges"]


@pytest.mark.slow  # two fresh interpreters import pyspark
def test_session_and_connectors_import_in_either_order() -> None:
    import subprocess
    import sys

    for first, second in [
        ("lakefeed.session", "lakefeed.connectors.files"),
        ("lakefeed.connectors.files", "lakefeed.session"),
        ("lakefeed.connectors.delta", "lakefeed.compat.patches"),
    ]:
        code = f"import {first}, {second}; from lakefeed.connectors import registry; "
        code += "print(len(registry.connectors()))"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "5"
    # the registry's own import loads no connector (they load on first lookup), so no Spark
    code = "import sys, lakefeed.connectors.registry; print('pyspark' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_check_connections_asks_each_sources_connector(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakefeed.runtime.connections import check_connections

    table, landing = tmp_path / "t", tmp_path / "landing"
    write_deltalake(str(table), pa.table({"x": [1]}))
    landing.mkdir()
    sources = {
        "f": [
            ("delta", {"path": str(table)}),
            ("DELTA", {"PATH": str(landing)}),
            ("cloudFiles", {"path": str(landing)}),
            ("parquet", {"path": str(tmp_path / "none")}),
            ("lakefeed_iot", {"rowsPerSecond": "5"}),  # nothing outside to ask
        ]
    }
    checks = [(c.target.split()[0], c.ok, c.detail) for c in check_connections(sources)]
    assert checks == [
        ("delta", True, "table at version 0"),
        (
            "delta",
            False,
            f"no Delta table at {landing} (a folder without _delta_log there): "
            "check the path, or create the table first",
        ),
        ("path", True, "exists"),
        ("path", False, f"{tmp_path / 'none'} does not exist: create it, or fix the path"),
    ]
