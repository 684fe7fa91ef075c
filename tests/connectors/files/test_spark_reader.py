"""cloudFiles read by Spark's own reader (the default), planned in Python.

The same discovery, limits and cleanup as lakefeed's reader, so the same rows per batch and the
same ``_metadata``; a record that does not fit fails the batch; what only lakefeed's reader can
do keeps it by default and is refused with ``lakefeed.reader=spark``.
"""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from lakefeed.connectors.files import read_files
from lakefeed.connectors.files.options import OptionError
from lakefeed.connectors.files.source import reader_choice
from tests.connectors.files.test_stream import _drain, _land

pytestmark = pytest.mark.compat  # the compatibility surfaces themselves

SCHEMA = "id BIGINT, kind STRING, at TIMESTAMP, score DOUBLE"


def _reader(spark, land, schema_location, reader: str, fmt: str = "json", **options: str):
    return (
        spark.readStream.format("cloudFiles")
        .schema(SCHEMA)
        .option("cloudFiles.format", fmt)
        .option("cloudFiles.schemaLocation", str(schema_location))
        .option("cloudFiles.maxFilesPerTrigger", "2")
        .option("includeMetadata", "false")
        .option("lakefeed.reader", reader)
        .options(**options)
        .load(str(land))
    )


def _sorted(batches: dict[int, list[dict]]) -> list[list[dict]]:
    return [sorted(rows, key=lambda r: r["id"]) for _, rows in sorted(batches.items())]


def test_spark_reader_streams_what_lakefeeds_reader_streams(spark, tmp_path) -> None:
    land = tmp_path / "land"
    for f in range(5):
        _land(
            land,
            f"f{f}.json",
            [
                {
                    "id": f * 10 + i,
                    "kind": "view" if i % 2 else "click",
                    "score": i / 2,
                    "at": f"2026-11-23T10:00:0{i}Z",
                }
                for i in range(4)
            ],
        )
    native = _sorted(_drain(_reader(spark, land, tmp_path / "s1", "spark"), tmp_path / "cp1"))
    python = _sorted(_drain(_reader(spark, land, tmp_path / "s2", "python"), tmp_path / "cp2"))
    assert native == python  # the same rows in the same batches (order within one may differ)
    assert [len(rows) for rows in native] == [8, 8, 4]
    assert native[0][1] == {"id": 1, "kind": "view", "at": native[0][1]["at"], "score": 0.5}
    assert native[0][1]["at"] is not None

    # Projection and filter go into Spark's parser; new files arrive in the next run.
    _land(land, "f9.json", [{"id": 99, "kind": "view", "score": 1.0, "at": None}])
    views = _reader(spark, land, tmp_path / "s1", "spark").where("kind = 'view'").select("id")
    assert [r["id"] for rows in _drain(views, tmp_path / "cp1").values() for r in rows] == [99]

    # _metadata by default from Spark's hidden column: what lakefeed's reader gives, the path
    # included (Spark has it as a URI, file:/a%20b%2Bc), in every batch (the projection is
    # built once per stream).
    _land(land / "a b+c", "f 1+2.json", [{"id": 100, "kind": "view"}])

    def metadata(location: str, **options: str) -> list[tuple]:
        opts = {
            "cloudFiles.schemaLocation": str(tmp_path / location),
            "cloudFiles.maxFilesPerTrigger": "4",
            **options,
        }
        frame = read_files(str(land), schema=SCHEMA, **opts)
        assert reader_choice(opts) is not None
        rows = _drain(frame, tmp_path / f"cp-{location}").values()
        return sorted((r["id"], r["_metadata"]) for batch in rows for r in batch)

    native_meta = metadata("m1")
    assert reader_choice({"cloudFiles.schemaLocation": str(tmp_path / "m1")}).reader == "spark"
    assert native_meta == metadata("m2", **{"lakefeed.reader": "python"})
    assert native_meta[-1][1]["file_path"] == str(land / "a b+c" / "f 1+2.json")


def test_spark_reader_csv_and_clean_source(spark, tmp_path) -> None:
    land = tmp_path / "land"
    land.mkdir()
    (land / "a.csv").write_text("id,kind,at,score\n1,view,2026-11-23 10:00:00,0.5\n2,click,,\n")
    frame = _reader(
        spark,
        land,
        tmp_path / "schema",
        "spark",
        fmt="csv",
        header="true",
        **{"cloudFiles.cleanSource": "DELETE"},
    )
    rows = [r for batch in _drain(frame, tmp_path / "cp").values() for r in batch]
    assert [(r["id"], r["kind"], r["score"]) for r in rows] == [
        (1, "view", 0.5),
        (2, "click", None),
    ]
    # cleanSource runs on the planner's commit, as with lakefeed's reader.
    _land(land, "b.csv", ["id,kind,at,score", "3,view,,"])
    _drain(frame, tmp_path / "cp")
    assert not (land / "a.csv").exists()


def test_spark_reader_fails_bad_records_and_refuses_what_it_cannot_do(spark, tmp_path) -> None:
    land = tmp_path / "land"
    _land(land, "bad.json", [{"id": "not a number", "kind": "view"}])
    with pytest.raises(StreamingQueryException, match="MALFORMED_RECORD|FAILED_READ_FILE"):
        _drain(_reader(spark, land, tmp_path / "s", "spark"), tmp_path / "cp")

    with pytest.raises(OptionError, match="rescued-data column"):
        (
            spark.readStream.format("cloudFiles")
            .option("cloudFiles.format", "json")
            .option("cloudFiles.schemaLocation", str(tmp_path / "s3"))
            .option("includeMetadata", "false")
            .option("lakefeed.reader", "spark")
            .load(str(land))  # an inferred schema has _rescued_data
        )


def _scan(frame, checkpoint) -> str:
    """The file scan line of the last micro-batch's physical plan (noop sink, availableNow)."""
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination(180)
        plan = query._jsq.explainInternal(False)
    finally:
        query.stop()
    return next(line for line in plan.splitlines() if "FileScan json" in line)


def test_unused_metadata_is_pruned_from_the_scan(spark, tmp_path) -> None:
    """``_metadata`` (kept by default) costs the scan nothing unless the query reads it: Spark's
    file metadata is not attached to the rows (PruneUnusedFileMetadata); what is read is."""
    land = tmp_path / "land"
    _land(land, "f0.json", [{"id": 1, "kind": "view"}, {"id": 2, "kind": "click"}])

    def stream(location: str):
        opts = {"cloudFiles.schemaLocation": str(tmp_path / location)}
        return read_files(str(land), schema=SCHEMA, **opts)

    unused = _scan(stream("s1").where("kind = 'view'").select("id"), tmp_path / "cp1")
    assert "FileScan json [id#" in unused and "file_" not in unused.split("]")[0]
    used = _scan(stream("s2").select("id", "_metadata.file_size"), tmp_path / "cp2")
    assert "file_size" in used.split("]")[0] and "file_path" not in used.split("]")[0]
