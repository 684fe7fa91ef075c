"""Which input a checkpoint committed, per connector, as batch-read options (Spark-free)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakefeed.connectors.delta.offsets import committed_input as delta_input
from lakefeed.connectors.files.filelog import committed_files
from lakefeed.connectors.files.filelog import committed_input as files_input
from lakefeed.connectors.generator.iot import IotConfig
from lakefeed.connectors.generator.source import committed_input as generator_input
from lakefeed.connectors.kafka.offsets import committed_input as kafka_input
from lakefeed.core.errors import CheckpointError
from lakefeed.runtime.committed import CommittedInput

IOT_END = {
    "offset": 1500,
    "startTime": 1767225600000,
    "config": IotConfig(rows_per_second=2).content_options(),
}
KAFKA = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
DELTA_END = {"sourceVersion": 1, "reservoirVersion": 4, "index": -1, "isStartingVersion": False}


def test_generator_reads_the_checkpoint_start_time_and_row_count() -> None:
    bounds = generator_input({"rowsPerSecond": "2", "backlogSeconds": "600"}, IOT_END)
    assert bounds == {"startTime": "1767225600000", "totalRows": "1500"}
    assert generator_input({"rowsPerSecond": "3"}, IOT_END) is None  # another stream
    assert generator_input({}, DELTA_END) is None


def test_kafka_ends_at_the_committed_offsets_and_starts_where_the_stream_did() -> None:
    end = {"t": {"0": 40, "1": 7}}
    earliest = kafka_input({**KAFKA, "startingOffsets": "earliest"}, end)
    assert earliest == {"endingOffsets": json.dumps(end)}
    latest = kafka_input(KAFKA, end, {"t": {"0": 30, "1": 7}})  # a stream starts at latest
    assert latest is not None and json.loads(latest["startingOffsets"]) == {"t": {"0": 30, "1": 7}}
    given = kafka_input({**KAFKA, "startingOffsets": '{"t": {"0": 5, "1": -2}}'}, end)
    assert given is not None and json.loads(given["startingOffsets"]) == {"t": {"0": 5, "1": -2}}
    assert kafka_input({**KAFKA, "subscribe": "other"}, end) is None
    assert kafka_input(KAFKA, IOT_END) is None
    with pytest.raises(CheckpointError, match="first batch"):
        kafka_input(KAFKA, end, None)  # started at latest, batch 0 no longer in the log


def test_files_read_the_committed_part_of_the_file_log(tmp_path: Path) -> None:
    state = tmp_path / "schema" / "_lakefeed_files"
    state.mkdir(parents=True)
    (state / "source.json").write_text(json.dumps({"source_id": "abc", "path": "/x"}))
    lines = [json.dumps([f"/x/{i}.json", 10, i]) + "\n" for i in range(3)]
    (state / "files.log").write_text("".join(lines) + '["/x/torn"')
    options = {"cloudFiles.schemaLocation": str(tmp_path / "schema")}
    assert files_input(options, {"sourceId": "abc", "index": 2}) == {"lakefeed.fileLogEnd": "2"}
    assert files_input(options, {"sourceId": "other", "index": 2}) is None
    assert [e.path for e in committed_files(str(tmp_path / "schema"), 2)] == [
        "/x/0.json",
        "/x/1.json",
    ]
    with pytest.raises(CheckpointError, match="holds 3 files"):
        committed_files(str(tmp_path / "schema"), 4)


def test_delta_reads_the_last_finished_version_or_says_why_not() -> None:
    assert delta_input({}, DELTA_END) == {"versionAsOf": "3"}
    assert delta_input({}, {"t": {"0": 1}}) is None
    with pytest.raises(CheckpointError, match="inside version 4"):
        delta_input({}, {**DELTA_END, "index": 2})
    with pytest.raises(CheckpointError, match="startingVersion"):
        delta_input({"startingVersion": "2"}, DELTA_END)


def _offset_log(checkpoint: Path, batch: int, watermark: int, *offsets: object) -> None:
    for folder in ("offsets", "commits"):
        (checkpoint / folder).mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": watermark}), *map(json.dumps, offsets)]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines))


def test_each_source_claims_its_offset_of_the_last_committed_batch(tmp_path: Path) -> None:
    checkpoint = tmp_path / "chk"
    assert CommittedInput.of("f", checkpoint) is None  # nothing committed yet
    _offset_log(checkpoint, 0, 0, {**DELTA_END, "reservoirVersion": 1}, {"t": {"0": 3}})
    (checkpoint / "commits" / "0").write_text("v1")
    _offset_log(checkpoint, 1, 99, DELTA_END, {"t": {"0": 9}})
    (checkpoint / "commits" / "1").write_text("v1")
    _offset_log(checkpoint, 2, 120, DELTA_END, {"t": {"0": 12}})  # planned, not committed
    committed = CommittedInput.of("f", checkpoint)
    assert committed is not None and committed.last.watermark_ms == 99
    # Sources claim offsets by shape, whatever order Spark listed them in.
    kafka = committed.bound("lakefeed_kafka", {**KAFKA, "startingOffsets": "earliest"})
    assert json.loads(kafka["endingOffsets"]) == {"t": {"0": 9}}
    assert committed.bound("delta", {"versionasof": "0"}) == {"versionAsOf": "3"}
    with pytest.raises(CheckpointError, match="holds no offset of its delta source"):
        committed.bound("delta", {})
    with pytest.raises(CheckpointError, match="format 'parquet'"):
        committed.bound("parquet", {})
