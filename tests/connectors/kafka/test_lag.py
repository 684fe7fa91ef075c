"""lag_from_progress: the contract the UI, status, metrics and event log rely on."""

from __future__ import annotations

import json

from lakefeed.connectors.kafka.lag import lag_from_progress

PYTHON_STREAM = "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream@1a2b"


def test_lag_from_json_text_offsets_as_spark_reports_them() -> None:
    progress = {
        "description": PYTHON_STREAM,
        "startOffset": "null",
        "endOffset": json.dumps({"events": {"0": 3, "1": 5}}),
        "latestOffset": json.dumps({"events": {"0": 99, "1": 5, "2": 4}}),
    }
    assert lag_from_progress(progress) == {
        "total": 100,
        "partitions": {"events-0": 96, "events-1": 0, "events-2": 4},
    }


def test_lag_ignores_the_topic_ids_beside_the_offsets() -> None:
    progress = {
        "description": PYTHON_STREAM,
        "endOffset": json.dumps({"events": {"0": 3}, "@topicIds": {"events": "AbC"}}),
        "latestOffset": json.dumps({"events": {"0": 10}}),
    }
    assert lag_from_progress(progress) == {"total": 7, "partitions": {"events-0": 7}}


def test_lag_from_parsed_offsets_and_spark_kafka_description() -> None:
    progress = {
        "description": "KafkaV2[Subscribe[a]]",
        "endOffset": {"a": {"10": 7, "2": 1}},
        "latestOffset": {"a": {"10": 9, "2": 1}},
    }
    lag = lag_from_progress(progress)
    assert lag == {"total": 2, "partitions": {"a-2": 0, "a-10": 2}}
    assert list(lag["partitions"]) == ["a-2", "a-10"]  # numeric partition order


def test_lag_never_negative() -> None:
    progress = {
        "description": PYTHON_STREAM,
        "endOffset": {"t": {"0": 10}},
        "latestOffset": {"t": {"0": 8}},
    }
    assert lag_from_progress(progress) == {"total": 0, "partitions": {"t-0": 0}}


def test_non_kafka_sources_give_none() -> None:
    assert lag_from_progress({"description": "DeltaSource[x]", "endOffset": {"version": 3}}) is None
    assert (
        lag_from_progress(
            {"description": PYTHON_STREAM, "endOffset": '{"version": 3}', "latestOffset": None}
        )
        is None
    )
    assert lag_from_progress({"description": "FileStreamSource[/x]"}) is None


def test_no_latest_offset_yet_gives_none() -> None:
    progress = {"description": PYTHON_STREAM, "endOffset": {"t": {"0": 1}}, "latestOffset": None}
    assert lag_from_progress(progress) is None
