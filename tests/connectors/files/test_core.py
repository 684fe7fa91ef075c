"""Spark-free core of the cloudFiles source: options, file log, schemas, file readers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from lakefeed.connectors.files.cleanup import clean_committed
from lakefeed.connectors.files.filelog import FileEntry, FileLog, list_files, state_dir
from lakefeed.connectors.files.globs import ListingCache, PathMatcher, glob_regex, select_objects
from lakefeed.connectors.files.options import FileSourceOptions, OptionError
from lakefeed.connectors.files.plan import ReadPlan
from lakefeed.connectors.files.readers import (
    BadRecordsError,
    NewColumnsError,
    UnreadableFileError,
    read_entry,
)
from lakefeed.connectors.files.schemas import (
    SchemaStore,
    apply_hints,
    infer_schema,
    parse_ddl,
)
from lakefeed.connectors.files.source import cap_end, plan_partitions, skipped_files
from lakefeed.core.options import parse_bytes


def _opts(path: Path, fmt: str = "json", **extra: str) -> FileSourceOptions:
    return FileSourceOptions.parse({"path": str(path), "cloudFiles.format": fmt, **extra})


def _entry(path: Path) -> FileEntry:
    stat = path.stat()
    return FileEntry(str(path), stat.st_size, stat.st_mtime_ns // 1_000_000)


def _plan(
    opts: FileSourceOptions,
    schema: str,
    tmp: Path,
    mode: str = "addNewColumns",
    rescue: str | None = "_rescued_data",
    metadata: bool = True,
) -> ReadPlan:
    return ReadPlan(opts, parse_ddl(schema), mode, rescue, metadata, str(tmp / "schema"))


def _rows(entry: FileEntry, plan: ReadPlan) -> list[dict]:
    batches = list(read_entry(entry, plan))
    assert all(b.schema == plan.arrow_schema for b in batches)
    return pa.Table.from_batches(batches, plan.arrow_schema).to_pylist() if batches else []


# ----------------------------------------------------------------------------------- options


def test_options_refuse_misspelt_and_invalid(tmp_path: Path) -> None:
    with pytest.raises(OptionError, match="unsupported option.*maxfilepertrigger"):
        _opts(tmp_path, **{"cloudFiles.maxFilePerTrigger": "1"})
    with pytest.raises(OptionError, match="cloudFiles.format must be one of"):
        FileSourceOptions.parse({"path": str(tmp_path)})
    with pytest.raises(OptionError, match="moveDestination"):
        _opts(tmp_path, **{"cloudFiles.cleanSource": "move"})
    with pytest.raises(OptionError, match="schemaEvolutionMode"):
        _opts(tmp_path, **{"cloudFiles.schemaEvolutionMode": "merge"})
    with pytest.raises(OptionError, match="positive integer"):
        _opts(tmp_path, **{"cloudFiles.maxFilesPerTrigger": "0"})
    with pytest.raises(OptionError, match="schemaLocation"):
        _opts(tmp_path).require_schema_location()
    with pytest.raises(OptionError, match="no file notification mode"):
        _opts(tmp_path, **{"cloudFiles.useNotifications": "true"})
    with pytest.raises(OptionError, match="needs a bucket"):
        FileSourceOptions.parse({"path": "s3://", "cloudFiles.format": "json"})
    with pytest.raises(OptionError, match="s3:// / s3a:// URIs only"):
        FileSourceOptions.parse({"path": "gs://landing/in", "cloudFiles.format": "json"})
    on_s3 = FileSourceOptions.parse(
        {
            "path": "s3a://landing/in/",
            "cloudFiles.format": "json",
            "cloudFiles.schemaLocation": "s3://b/s",
        }
    )
    assert (on_s3.path, on_s3.schema_location, on_s3.matcher.base) == (
        "s3a://landing/in",
        "s3://b/s",
        "s3a://landing/in",
    )
    opts = _opts(
        tmp_path,
        **{"CLOUDFILES.SCHEMAEVOLUTIONMODE": "RESCUE", "cloudFiles.useNotifications": "false"},
    )
    assert opts.evolution_mode == "rescue" and opts.rescued_data_column == "_rescued_data"
    assert parse_bytes("10g") == 10 * 1024**3 and parse_bytes("512k") == 512 * 1024


# ---------------------------------------------------------------------------------- file log


def test_file_log_discovers_each_file_once_and_survives_a_torn_append(tmp_path: Path) -> None:
    land = tmp_path / "land"
    (land / "a" / "b").mkdir(parents=True)
    (land / "one.json").write_text("{}\n")
    (land / "a" / "b" / "two.json").write_text("{}\n")
    (land / ".three.json.tmp").write_text("{}\n")  # being written: hidden
    (land / "_SUCCESS").write_text("")
    (land / "notes.txt").write_text("x")
    location = str(tmp_path / "schema")
    json_files = PathMatcher.of(str(land), "*.json", recursive=True)
    log = FileLog.open(location, json_files, include_existing=True)
    assert log.discover() == 2
    assert log.discover() == 0
    (land / "four.json").write_text("{}\n")
    assert log.discover() == 1
    assert [Path(e.path).name for e in log.entries(0, 3)][-1] == "four.json"
    # A kill -9 in the middle of an append leaves half a line: it is dropped on reopen.
    with (state_dir(location) / "files.log").open("a") as f:
        f.write('["/x/half.json", 3')
    reopened = FileLog.open(location, json_files, include_existing=True)
    assert len(reopened) == 3 and reopened.source_id == log.source_id
    assert reopened.discover() == 0
    top_level = PathMatcher.of(str(land), None, recursive=False)
    assert sorted(Path(e.path).name for e in list_files(top_level)) == [
        "four.json",
        "notes.txt",
        "one.json",
    ]


TREE = [
    "2026-01/a.json",
    "2026-01/b.jsonl",
    "2026-01/c.csv",
    "2026-02/d.json",
    "2025-12/e.json",
    "2026-01/deep/f.json",
    "top.json",
    ".hidden.json",
    "_tmp/g.json",
    "2026-01/_SUCCESS",
    "day=2026-03-01/hour=01/h.json",
]


def test_hadoop_glob_alternation_in_filter_and_load_path(tmp_path: Path) -> None:
    assert glob_regex("*.{json,jsonl}").fullmatch("a.jsonl")
    assert not glob_regex("*.{json,jsonl}").fullmatch("a.csv")
    assert glob_regex("{a{1,2},b}?.[^x]").fullmatch("a2z.y")
    assert glob_regex(r"\{x\}").fullmatch("{x}")
    land = tmp_path / "land"
    for rel in TREE:
        (land / rel).parent.mkdir(parents=True, exist_ok=True)
        (land / rel).write_text("{}\n")

    def names(path: Path, name_glob: str | None = None, recursive: bool = True) -> list[str]:
        found = list_files(PathMatcher.of(str(path), name_glob, recursive))
        return sorted(os.path.relpath(e.path, land) for e in found)

    assert names(land, "*.{json,jsonl}", recursive=False) == ["top.json"]
    assert names(land / "2026-01", "*.{json,jsonl}") == [
        "2026-01/a.json",
        "2026-01/b.jsonl",
        "2026-01/deep/f.json",
    ]
    # A glob segment that matches folders selects the files below them.
    assert names(land / "2026-{01,02}", "*.json", recursive=False) == [
        "2026-01/a.json",
        "2026-02/d.json",
    ]
    assert names(land / "*" / "*.{jsonl,csv}") == ["2026-01/b.jsonl", "2026-01/c.csv"]
    with pytest.raises(OptionError, match="unclosed"):
        _opts(land, pathGlobFilter="*.{json")
    # The stream's file log discovers through the same glob, once per file.
    log = FileLog.open(
        str(tmp_path / "s"), _opts(land / "20*", pathGlobFilter="*.json").matcher, True
    )
    assert log.discover() == 4 and log.discover() == 0
    (land / "2026-02" / "g.json").write_text("{}\n")
    (land / "2026-02" / "h.txt").write_text("x")
    assert log.discover() == 1 and log.entries(4, 5)[0].path.endswith("g.json")


PATTERNS = [
    ("", "*.{json,jsonl}", False),
    ("/2026-01", "*.{json,jsonl}", True),
    ("/2026-{01,02}", "*.json", False),
    ("/*/*.{jsonl,csv}", None, True),
    ("/20*", "*.json", True),
    ("/day=*/hour=01", None, True),
    ("", None, True),
]


@pytest.mark.parametrize(("suffix", "name_glob", "recursive"), PATTERNS)
def test_object_keys_select_what_the_folder_walk_selects(
    tmp_path: Path, suffix: str, name_glob: str | None, recursive: bool
) -> None:
    """One listing of keys under a prefix (S3) picks the same files as walking folders."""
    land = tmp_path / "land"
    for rel in TREE:
        (land / rel).parent.mkdir(parents=True, exist_ok=True)
        (land / rel).write_text("{}\n")
    walked = list_files(PathMatcher.of(f"{land}{suffix}", name_glob, recursive))
    matcher = PathMatcher.of(f"s3://bucket/land{suffix}", name_glob, recursive)
    base = matcher.base.removeprefix("s3://bucket/land").lstrip("/")
    listed = [
        (rel.removeprefix(base).lstrip("/"), 3, 0)
        for rel in TREE
        if rel.startswith(base + "/" if base else "")
    ]
    cache = ListingCache.empty()
    found = select_objects(matcher, listed, cache)
    assert sorted(path.removeprefix("s3://bucket/land/") for path, _, _ in found) == sorted(
        os.path.relpath(e.path, land) for e in walked
    )
    for path, _, _ in found:  # what the log ingested is remembered: the next listing skips it
        cache.remember(path)
    assert select_objects(matcher, listed, cache) == []


def test_file_log_include_existing_false_and_wrong_source(tmp_path: Path) -> None:
    land = tmp_path / "land"
    land.mkdir()
    (land / "old.json").write_text("{}\n")
    location = str(tmp_path / "schema")
    log = FileLog.open(location, PathMatcher.of(str(land), None, True), include_existing=False)
    (land / "new.json").write_text("{}\n")
    assert log.discover() == 1
    assert Path(log.entries(0, 1)[0].path).name == "new.json"
    with pytest.raises(OptionError, match="belongs to a stream over"):
        FileLog.open(location, PathMatcher.of(str(tmp_path / "x"), None, True), True)


def test_batch_limits_and_partition_packing() -> None:
    entries = [FileEntry(f"/f{i}", 100, i) for i in range(10)]
    assert cap_end(entries, 0, 10, 3, None) == 3
    assert cap_end(entries, 0, 10, None, 250) == 2
    assert cap_end(entries, 0, 10, None, 50) == 1  # always at least one file
    assert cap_end(entries[5:], 5, 10, 100, None) == 10
    parts = plan_partitions(entries, slots=2)
    assert len(parts) == 2 and sum(len(p.entries) for p in parts) == 10
    assert plan_partitions([], slots=2) == []


# ----------------------------------------------------------------------------------- schemas


def test_infer_json_strings_by_default_types_on_request(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(
        '{"id": 1, "v": 1.5, "tags": ["a"], "o": {"k": 1}}\n{bad\n{"id": 2, "n": null}\n'
    )
    strings = infer_schema([str(path)], _opts(tmp_path))
    assert [(f.name, f.dataType) for f in strings.fields] == [
        (n, StringType()) for n in ("id", "v", "tags", "o", "n")
    ]
    typed = infer_schema([str(path)], _opts(tmp_path, **{"cloudFiles.inferColumnTypes": "true"}))
    assert typed["id"].dataType == LongType() and typed["v"].dataType == DoubleType()
    assert typed["tags"].dataType == ArrayType(StringType())
    assert typed["o"].dataType == StructType([StructField("k", LongType())])
    assert typed["n"].dataType == StringType()


def test_schema_hints_ddl_and_store_versions(tmp_path: Path) -> None:
    schema = parse_ddl(
        "id BIGINT, price DECIMAL(10,2), ts TIMESTAMP, "
        "tags ARRAY<STRING>, attrs MAP<STRING, DOUBLE>, `odd name` STRUCT<a: INT NOT NULL>"
    )
    assert schema["price"].dataType == DecimalType(10, 2)
    assert schema["attrs"].dataType == MapType(StringType(), DoubleType())
    assert schema["odd name"].dataType.fields[0].nullable is False
    hinted = apply_hints(parse_ddl("id STRING, ts STRING"), "ts TIMESTAMP, extra LONG")
    assert [(f.name, f.dataType) for f in hinted.fields] == [
        ("id", StringType()),
        ("ts", TimestampType()),
        ("extra", LongType()),
    ]
    with pytest.raises(OptionError, match="unknown type"):
        parse_ddl("a WIDGET")
    store = SchemaStore(tmp_path)
    assert store.latest() is None
    assert store.create(0, parse_ddl("a STRING"), "inferred")
    assert not store.create(0, parse_ddl("b STRING"), "lost the race")
    assert store.add_columns([StructField("b", LongType())], "new") == 1
    assert store.add_columns([StructField("b", LongType())], "same again") == 1  # idempotent
    assert store.latest() == (1, parse_ddl("a STRING, b BIGINT"))


# ------------------------------------------------------------------------------------ readers


def test_json_fast_path_metadata_and_rescue(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"id": 1, "name": "a"}\n\n{"id": 2}\n')
    plan = _plan(_opts(tmp_path), "id BIGINT, name STRING", tmp_path)
    rows = _rows(_entry(good), plan)
    assert [(r["id"], r["name"], r["_rescued_data"]) for r in rows] == [
        (1, "a", None),
        (2, None, None),
    ]
    meta = rows[0]["_metadata"]
    assert meta["file_path"] == str(good) and meta["file_name"] == "good.json"
    assert meta["file_size"] == good.stat().st_size
    assert meta["file_modification_time"].timestamp() == pytest.approx(good.stat().st_mtime, 1e-3)

    bad = tmp_path / "bad.json"
    bad.write_text('{"id": 3, "name": 7}\n{not json\n{"id": "x", "ID": 5}\n[1, 2]\n')
    rows = _rows(_entry(bad), plan)
    assert len(rows) == 4  # nothing dropped
    rescued = [json.loads(r["_rescued_data"] or "null") for r in rows]
    assert rows[0]["name"] == "7" and rows[0]["_rescued_data"] is None  # string column keeps text
    assert rescued[1] == {"_corrupt_record": "{not json", "_file_path": str(bad)}
    assert rows[2]["id"] is None and rescued[2] == {"id": "x", "ID": 5, "_file_path": str(bad)}
    assert rescued[3]["_corrupt_record"] == "[1, 2]"


def test_new_columns_per_evolution_mode(tmp_path: Path) -> None:
    path = tmp_path / "late.json"
    path.write_text('{"id": 1, "added": "x", "score": 2.5}\n')
    opts = _opts(tmp_path)
    SchemaStore(tmp_path / "schema").create(0, parse_ddl("id BIGINT"), "inferred")

    with pytest.raises(NewColumnsError, match=r"\['added', 'score'\].*version 1"):
        _rows(_entry(path), _plan(opts, "id BIGINT", tmp_path, "addNewColumns"))
    assert SchemaStore(tmp_path / "schema").latest() == (
        1,
        parse_ddl("id BIGINT, added STRING, score DOUBLE"),
    )
    with pytest.raises(NewColumnsError, match="failOnNewColumns"):
        _rows(_entry(path), _plan(opts, "id BIGINT", tmp_path, "failOnNewColumns"))
    rescued = _rows(_entry(path), _plan(opts, "id BIGINT", tmp_path, "rescue"))
    assert json.loads(rescued[0]["_rescued_data"]) == {
        "added": "x",
        "score": 2.5,
        "_file_path": str(path),
    }
    ignored = _rows(_entry(path), _plan(opts, "id BIGINT", tmp_path, "none", rescue=None))
    assert ignored == [{"id": 1, "_metadata": ignored[0]["_metadata"]}]


def test_misfit_without_rescue_column_fails_loudly(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('{"id": "not a number"}\n')
    plan = _plan(_opts(tmp_path), "id BIGINT", tmp_path, "none", rescue=None, metadata=False)
    with pytest.raises(BadRecordsError, match="rescuedDataColumn"):
        _rows(_entry(path), plan)


def test_csv_bad_rows_and_casts_are_rescued(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("id,amount,city\n1,2.5,Oslo\n2,abc,Rome\n3,1,2,3,4\n4,,\n")
    opts = _opts(tmp_path, "csv", header="true")
    rows = _rows(_entry(path), _plan(opts, "id INT, amount DOUBLE, city STRING", tmp_path))
    by_id = {r["id"]: r for r in rows}
    assert by_id[1]["amount"] == 2.5 and by_id[1]["_rescued_data"] is None
    assert json.loads(by_id[2]["_rescued_data"]) == {"amount": "abc", "_file_path": str(path)}
    assert by_id[4]["amount"] is None and by_id[4]["city"] is None
    corrupt = [r for r in rows if r["id"] is None]
    assert json.loads(corrupt[0]["_rescued_data"])["_corrupt_record"] == "3,1,2,3,4"
    assert len(rows) == 4


def test_parquet_cast_and_corrupt_file_skip_or_fail(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "x": ["a", "b"]}), path)
    opts = _opts(tmp_path, "parquet")
    rows = _rows(_entry(path), _plan(opts, "id BIGINT, x STRING", tmp_path))
    assert [(r["id"], r["x"]) for r in rows] == [(1, "a"), (2, "b")]

    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(UnreadableFileError, match="ignoreCorruptFiles=true"):
        _rows(_entry(broken), _plan(opts, "id BIGINT", tmp_path))
    lenient = _opts(tmp_path, "parquet", ignoreCorruptFiles="true")
    assert _rows(_entry(broken), _plan(lenient, "id BIGINT", tmp_path)) == []
    [record] = skipped_files(str(tmp_path / "schema"))
    assert record["path"] == str(broken) and "cannot read" in record["error"]


def test_clean_source_move_and_delete(tmp_path: Path) -> None:
    land = tmp_path / "land"
    (land / "d").mkdir(parents=True)
    files = [land / "a.json", land / "d" / "b.json"]
    for f in files:
        f.write_text("{}\n")
    archive = tmp_path / "archive"
    opts = _opts(
        land,
        **{
            "cloudFiles.cleanSource": "MOVE",
            "cloudFiles.cleanSource.moveDestination": str(archive),
        },
    )
    entries = [_entry(f) for f in files]
    clean_committed(entries, opts)
    clean_committed(entries, opts)  # a repeated commit finds them gone: fine
    assert sorted(str(p.relative_to(archive)) for p in archive.rglob("*.json")) == [
        "a.json",
        os.path.join("d", "b.json"),
    ]
    (land / "c.json").write_text("{}\n")
    clean_committed([_entry(land / "c.json")], _opts(land, **{"cloudFiles.cleanSource": "DELETE"}))
    assert not (land / "c.json").exists()
