"""cloudFiles read by lakefeed's Arrow reader in a planned stream (``lakefeed.reader=arrow``):
only the columns the flow reads are parsed and rows its filter drops are never built, with the
same rows as lakefeed's Python reader, which parses everything (rescued data, ``_metadata``,
corrupt files, schema evolution)."""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException

from lakefeed.connectors.files import read_files
from lakefeed.connectors.files.source import reader_choice, skipped_files
from tests.connectors.files.test_stream import _all, _drain, _land

SCHEMA = "id BIGINT, kind STRING, note STRING"


def _flow(land, location, reader: str, **options: str):
    opts = {"cloudFiles.schemaLocation": str(location), "lakefeed.reader": reader, **options}
    return read_files(str(land), schema=SCHEMA, **opts)


def _ids(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["id"] is not None, r["id"] or 0))


def test_arrow_reader_streams_the_python_readers_rows(spark, tmp_path, caplog) -> None:
    land = tmp_path / "land"
    _land(
        land,
        "a.json",
        [{"id": 1, "kind": "view", "note": "x", "extra": 1}, {"id": 2, "kind": "click", "note": 3}],
    )
    _land(land, "b.json", [{"id": "three", "kind": "view"}, "{broken", {"id": 4, "kind": "view"}])

    def views(reader: str, location: str):
        flow = _flow(land, tmp_path / location, reader, rescuedDataColumn="_rescued_data")
        return flow.where("kind = 'view'").select("id", "_rescued_data", "_metadata.file_name")

    with caplog.at_level(logging.INFO, logger="lakefeed.connectors.files"):
        arrow = _ids(_all(_drain(views("arrow", "s1"), tmp_path / "c1")))
    assert str(reader_choice({"cloudFiles.schemaLocation": str(tmp_path / "s1")})).startswith(
        "lakefeed's Arrow reader"
    )
    python = _ids(_all(_drain(views("python", "s2"), tmp_path / "c2")))
    assert arrow == python
    assert [(r["id"], r["file_name"]) for r in arrow] == [
        (None, "b.json"),
        (1, "a.json"),
        (4, "b.json"),
    ]
    assert json.loads(arrow[0]["_rescued_data"])["id"] == "three"
    narrowed = [r for r in caplog.records if r.getMessage() == "cloudFiles Arrow reader"]
    assert narrowed and narrowed[0].__dict__["filters"][-1] == "kind eq 'view'"
    assert set(narrowed[0].__dict__["columns"]) == {"id", "kind", "_rescued_data", "_metadata"}

    # Not reading the rescued column: unused fields are skipped unparsed, rows still the same.
    plain = _flow(land, tmp_path / "s3", "arrow", rescuedDataColumn="_rescued_data")
    ids = _all(_drain(plain.where("kind = 'view'").select("id"), tmp_path / "c3"))
    assert _ids(ids) == [{"id": None}, {"id": 1}, {"id": 4}]


def test_arrow_reader_skips_corrupt_files_as_recorded(spark, tmp_path) -> None:
    land = tmp_path / "land"
    land.mkdir()
    pq.write_table(
        pa.table({"id": [1, 2], "kind": ["view", "click"], "note": ["a", "b"]}),
        land / "good.parquet",
    )
    (land / "bad.parquet").write_bytes(b"not parquet at all")
    flow = read_files(
        str(land),
        format="parquet",
        schema=SCHEMA,
        ignoreCorruptFiles="true",
        **{"cloudFiles.schemaLocation": str(tmp_path / "s"), "lakefeed.reader": "arrow"},
    )
    rows = _all(_drain(flow.where("kind = 'view'").select("id"), tmp_path / "c"))
    assert rows == [{"id": 1}]
    assert [s["path"].rsplit("/", 1)[-1] for s in skipped_files(str(tmp_path / "s"))] == [
        "bad.parquet"
    ]


def test_arrow_reader_evolves_an_inferred_schema(spark, tmp_path) -> None:
    land = tmp_path / "land"
    _land(land, "a.json", [{"id": 1, "kind": "view"}])
    location = tmp_path / "s"

    def flow():
        frame = read_files(
            str(land), **{"cloudFiles.schemaLocation": str(location), "lakefeed.reader": "arrow"}
        )
        return frame.where("kind = 'view'").drop("_metadata")

    assert _all(_drain(flow(), tmp_path / "c")) == [
        {"id": "1", "kind": "view", "_rescued_data": None}
    ]
    _land(land, "b.json", [{"id": 2, "kind": "view", "fresh": "new"}])
    with pytest.raises(StreamingQueryException, match="NEW_FIELDS_IN_FILE"):
        _drain(flow(), tmp_path / "c")
    rows = _all(_drain(flow(), tmp_path / "c"))  # restarted: the stopped batch, new schema
    assert rows == [{"id": "2", "kind": "view", "fresh": "new", "_rescued_data": None}]
