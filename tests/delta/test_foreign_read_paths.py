"""Every read path over every made table (:mod:`tests.delta.foreign`): the answer is delta-rs's
kernel reader's (``QueryBuilder``) at the version the path reads, and a table with a reader
feature lakefeed does not support is refused on every path with the feature's code before any
row comes back.

Paths: ``format("delta").load`` (latest, ``versionAsOf``, ``timestampAsOf``, which uses the
in-commit timestamps where a table has them), ``readStream`` (initial snapshot, then the last
commit incrementally, with ``skipChangeCommits`` where that commit deletes rows), the static side
of a stream–static join, ``DeltaTable.forPath`` (``toDF``, ``history``, ``detail``), Delta SQL
``delta.`path```, ``lakefeed table info|history`` and a pipeline's ``lf.source("delta")``.
One Spark session for the module; the tables are made once per test session.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import write_deltalake

from lakefeed.cli.main import cli
from lakefeed.delta import log
from lakefeed.delta import table as housekeeping
from tests.delta.foreign import START_MS
from tests.delta.test_foreign_tables import (
    READABLE,
    REFUSED,
    Made,
    _sorted,
    collected,
    expected,
)
from tests.delta.test_foreign_tables import _spark_rows as _rows

pytestmark = pytest.mark.compat  # format("delta"), DeltaTable and Delta SQL on the test session

TABLES = [*READABLE, "vacuum-protocol-check"]
Rows = list[tuple]


def truth(made: Made, name: str, version: int | None = None) -> Rows:
    """delta-rs's rows of the table at ``version``; the made rows where delta-rs's scan
    refuses the table's feature (vacuumProtocolCheck, nothing for a reader to do)."""
    folder, intended = made
    if name == "vacuum-protocol-check":
        assert version is None
        return _sorted(intended[name])
    return expected(folder / name, version)


def commit_time(version: int) -> dt.datetime:
    """The time of commit ``version`` of every made table (its in-commit timestamp where it
    has them, else its file time)."""
    return dt.datetime.fromtimestamp((START_MS + version * 60_000) / 1000, dt.UTC)


def latest(root: Path) -> int:
    found = log.latest_version(str(root))
    assert found is not None
    return found


def truncated(source: Path, root: Path, version: int) -> None:
    """A copy of the table at ``source`` as it was at ``version`` (later commits, checkpoints
    and a ``_last_checkpoint`` naming them left out)."""
    shutil.copytree(source, root)
    folder = root / "_delta_log"
    for item in folder.iterdir():
        number = item.name.split(".")[0]
        if number.isdigit() and int(number) > version:
            item.unlink()
    pointer = folder / "_last_checkpoint"
    if pointer.exists() and json.loads(pointer.read_text())["version"] > version:
        pointer.unlink()


def grown(source: Path, root: Path, version: int) -> None:
    """Commit ``version`` of ``source`` lands in its copy ``root``."""
    name = f"{version:020d}.json"
    shutil.copy(source / "_delta_log" / name, root / "_delta_log" / name)


def deletes_rows(root: Path, version: int) -> bool:
    """Whether commit ``version`` removes data (a DELETE): a stream needs an option for it."""
    actions = log.commit_actions(str(root), version) or []
    return any("remove" in a and a["remove"].get("dataChange", True) for a in actions)


# ---------------------------------------------------------------- Spark-free paths


@pytest.mark.parametrize("name", TABLES)
def test_lakefeed_table_info_counts_the_rows_a_reader_sees(made: Made, name: str) -> None:
    """``lakefeed table info``: deleted rows of a deletion vector are no rows."""
    root = made[0] / name
    assert housekeeping.info(root).rows == len(truth(made, name))
    shown = CliRunner().invoke(cli, ["table", "info", str(root)])
    assert shown.exit_code == 0, shown.output
    assert re.search(rf"│ rows +│ {len(truth(made, name)):,} +│", shown.output), shown.output


@pytest.mark.parametrize("name", TABLES)
def test_lakefeed_table_history_gives_each_commit_its_time(made: Made, name: str) -> None:
    """``lakefeed table history --json``: with in-commit timestamps a commit's time is its
    ``inCommitTimestamp`` (the made table's file times run backwards)."""
    root = made[0] / name
    shown = CliRunner().invoke(cli, ["table", "history", "-n", "100", "--json", str(root)])
    assert shown.exit_code == 0, shown.output
    entries = json.loads(shown.output)
    assert [e["version"] for e in entries] == list(range(latest(root), -1, -1))
    if name == "in-commit-timestamps":
        times = [dt.datetime.fromisoformat(e["timestamp"]) for e in entries]
        assert times == [commit_time(e["version"]) for e in entries]


# ---------------------------------------------------------------- Spark paths


def _collect_stream(frame, checkpoint: Path) -> Rows:  # noqa: ANN001
    """A streaming DataFrame run once with ``availableNow``: the rows of its micro-batches."""
    return sorted(collected(frame, checkpoint), key=repr)


Path_ = Callable[..., tuple[Rows, Rows]]
"""A read path: (spark, made, name, tmp_path) to (rows read, rows expected)."""


def load_latest(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    root = str(made[0] / name)
    return _rows(spark.read.format("delta").load(root)), truth(made, name)


def load_version(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    root = made[0] / name
    version = latest(root) - 1
    frame = spark.read.format("delta").option("versionAsOf", version).load(str(root))
    return _rows(frame), expected(root, version)


def load_timestamp(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    """Half a minute after commit ``latest - 1``: that version."""
    root = made[0] / name
    version = latest(root) - 1
    stamp = (commit_time(version) + dt.timedelta(seconds=30)).isoformat()
    frame = spark.read.format("delta").option("timestampAsOf", stamp).load(str(root))
    return _rows(frame), expected(root, version)


def sql_select(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    root = made[0] / name
    return _rows(spark.sql(f"SELECT * FROM delta.`{root}`")), truth(made, name)


def sql_version(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    root = made[0] / name
    version = latest(root) - 1
    frame = spark.sql(f"SELECT * FROM delta.`{root}` VERSION AS OF {version}")
    return _rows(frame), expected(root, version)


def sql_timestamp(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    """``TIMESTAMP AS OF`` half a minute after commit ``latest - 1``: that version."""
    root = made[0] / name
    version = latest(root) - 1
    stamp = (commit_time(version) + dt.timedelta(seconds=30)).strftime("%Y-%m-%d %H:%M:%S")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    frame = spark.sql(f"SELECT * FROM delta.`{root}` TIMESTAMP AS OF '{stamp}'")
    return _rows(frame), expected(root, version)


def api_to_df(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    from lakefeed.compat.delta_spark.tables import DeltaTable as Api

    frame = Api.forPath(spark, str(made[0] / name)).toDF()
    return _rows(frame), truth(made, name)


def api_history_detail(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    """``history()``: one row per commit at its time; ``detail()``: the snapshot's files."""
    from lakefeed.compat.delta_spark.tables import DeltaTable as Api

    root = made[0] / name
    api = Api.forPath(spark, str(root))
    history = [(r["version"], r["timestamp"]) for r in api.history().collect()]
    detail = api.detail().collect()[0]
    times = [(v, t.astimezone(dt.UTC) if t.tzinfo else t) for v, t in history]
    if name == "in-commit-timestamps":
        want = [(v, commit_time(v).replace(tzinfo=None)) for v in range(latest(root), -1, -1)]
        local = [(v, t.astimezone(dt.UTC).replace(tzinfo=None)) for v, t in history]
        assert local == want
    got = [(len(times), detail["numFiles"])]
    return got, [(latest(root) + 1, len(log.open_table(str(root)).file_uris()))]


def stream_snapshot(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    root = str(made[0] / name)
    frame = spark.readStream.format("delta").load(root)
    return _collect_stream(frame, tmp / "cp"), truth(made, name)


def stream_incremental(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    """The table as of its last commit but one, streamed; then the last commit lands and the
    same query reads it: its new rows, or none where it deletes (``skipChangeCommits``)."""
    source, root = made[0] / name, tmp / "t"
    last = latest(source)
    truncated(source, root, last - 1)
    options = {"skipChangeCommits": "true"} if deletes_rows(source, last) else {}
    frame = spark.readStream.format("delta").options(**options)
    first = _collect_stream(frame.load(str(root)), tmp / "cp")
    assert first == expected(source, last - 1)
    grown(source, root, last)
    again = _collect_stream(frame.load(str(root)), tmp / "cp")
    if options:
        return again, []
    before = set(expected(source, last - 1))
    return again, [r for r in expected(source, last) if r not in before]


def stream_starting_version(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    """``startingVersion`` = the last commit: only what it adds (nothing for a DELETE under
    ``ignoreDeletes``/``skipChangeCommits``)."""
    source = made[0] / name
    last = latest(source)
    deletes = deletes_rows(source, last)
    options = {"startingVersion": str(last)}
    if deletes:
        options["skipChangeCommits"] = "true"
    frame = spark.readStream.format("delta").options(**options).load(str(source))
    rows = _collect_stream(frame, tmp / "cp")
    if deletes:
        return rows, []
    before = set(expected(source, last - 1))
    return rows, [r for r in expected(source, last) if r not in before]


def stream_static_join(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    """The table as the static side of a stream–static join: each streamed key meets every
    row of the table."""
    keys = str(tmp / "keys")
    write_deltalake(keys, pa.table({"__key": pa.array([1], pa.int32())}))
    static = spark.read.format("delta").load(str(made[0] / name))
    joined = spark.readStream.format("delta").load(keys).crossJoin(static).drop("__key")
    return _collect_stream(joined, tmp / "cp"), truth(made, name)


PIPELINE = """
import lakefeed as lf

@lf.table
def copied():
    return lf.source("delta", lf.config("src"))
"""


def pipeline_source(spark, made: Made, name: str, tmp: Path) -> tuple[Rows, Rows]:  # noqa: ANN001
    """A pipeline streaming the table with ``lf.source("delta")``; ``verify`` (a batch read
    at the stream's version) agrees."""
    import lakefeed as lf
    from lakefeed.core.lakehouse import Lakehouse
    from tests.pipeline.support import load, table, write

    root = str(made[0] / name)
    folder = write(tmp / "p", {"copy.py": PIPELINE})
    lakehouse = Lakehouse.at(tmp / "lh")
    assert lf.run(load([folder], {"src": root}), lakehouse=lakehouse, spark=spark).ok
    check = lf.verify(
        load([folder], {"src": root}), lakehouse=lakehouse, spark=spark, run_first=False
    )
    assert check.ok, check.tables
    return _sorted(table(lakehouse, "copied")), truth(made, name)


PATHS: dict[str, Path_] = {
    "load": load_latest,
    "versionAsOf": load_version,
    "timestampAsOf": load_timestamp,
    "sql": sql_select,
    "sql-version": sql_version,
    "sql-timestamp": sql_timestamp,
    "toDF": api_to_df,
    "history-detail": api_history_detail,
    "stream-snapshot": stream_snapshot,
    "stream-incremental": stream_incremental,
    "stream-startingVersion": stream_starting_version,
    "stream-static-join": stream_static_join,
}
NO_HISTORY = {
    "column-mapping-name",
    "column-mapping-id",
    "stats-all-types-name",
    "stats-all-types-id",
    "vacuum-protocol-check",
}
"""Tables of one version: no version before the last to travel to or stream from."""
CASES = [
    (name, path)
    for name in TABLES
    for path in PATHS
    if not (name in NO_HISTORY and path not in ("load", "sql", "toDF", "stream-snapshot"))
]


@pytest.mark.parametrize(("name", "path"), CASES)
def test_every_read_path_reads_what_delta_rs_reads(
    spark,  # noqa: ANN001
    made: Made,
    tmp_path: Path,
    name: str,
    path: str,
) -> None:
    got, want = PATHS[path](spark, made, name, tmp_path)
    assert got == want


def deleted_by_commit(root: Path) -> list[tuple]:
    """The change feed the made table must give: for each DELETE commit ``v``, the rows of
    version ``v - 1`` that version ``v`` no longer holds (delta-rs's snapshots)."""
    return sorted(
        (v, "delete", *row)
        for v in range(1, latest(root) + 1)
        for row in set(expected(root, v - 1)) - set(expected(root, v))
    )


def _changes(frame) -> list[tuple]:  # noqa: ANN001
    columns = ["_commit_version", "_change_type", "part", "col1", "col2"]
    return sorted(tuple(r) for r in frame.select(*columns).collect())


def test_the_change_feed_of_a_deletion_vector_table(spark, made: Made, tmp_path: Path) -> None:  # noqa: ANN001
    """``readChangeFeed`` (batch and stream) and ``table_changes_by_path`` over DELETEs that
    wrote deletion vectors and ``_change_data`` files (physical names, column mapping)."""
    root = made[0] / "dv-change-feed"
    want = deleted_by_commit(root)
    assert len(want) == 17
    batch = spark.read.format("delta").option("readChangeFeed", "true")
    assert _changes(batch.option("startingVersion", 1).load(str(root))) == want
    sql = spark.sql(f"SELECT * FROM table_changes_by_path('{root}', 1)")
    assert _changes(sql) == want
    stream = spark.readStream.format("delta").option("readChangeFeed", "true")
    rows = _collect_stream(stream.option("startingVersion", 1).load(str(root)), tmp_path / "cp")
    columns = stream.option("startingVersion", 1).load(str(root)).columns
    picked = [columns.index(c) for c in ("_commit_version", "_change_type", "part", "col1", "col2")]
    assert sorted(tuple(r[i] for i in picked) for r in rows) == want


@pytest.mark.parametrize("name", ["dv-change-feed", "in-commit-timestamps", "v2-checkpoint-json"])
def test_a_pipeline_reads_a_foreign_table(spark, made: Made, tmp_path: Path, name: str) -> None:  # noqa: ANN001
    got, want = pipeline_source(spark, made, name, tmp_path)
    assert got == want


REFUSING: dict[str, Callable] = {
    "load": lambda spark, root: spark.read.format("delta").load(root).collect(),
    "sql": lambda spark, root: spark.sql(f"SELECT * FROM delta.`{root}`").collect(),
    "toDF": lambda spark, root: _api(spark, root).toDF().collect(),
    "stream": lambda spark, root: spark.readStream.format("delta").load(root),
    "static-join": lambda spark, root: spark.range(1).crossJoin(
        spark.read.format("delta").load(root)
    ),
}


def _api(spark, root: str):  # noqa: ANN001, ANN202
    from lakefeed.compat.delta_spark.tables import DeltaTable as Api

    return Api.forPath(spark, root)


@pytest.mark.parametrize("path", sorted(REFUSING))
@pytest.mark.parametrize(("name", "feature"), sorted(REFUSED.items()))
def test_an_unsupported_reader_feature_is_refused_on_every_path(
    spark,  # noqa: ANN001
    made: Made,
    name: str,
    feature: str,
    path: str,
) -> None:
    """Refused when the read is planned, naming the feature, with lakefeed's code."""
    with pytest.raises(Exception, match=rf"{log.READER_FEATURE}[\s\S]*{feature}"):
        REFUSING[path](spark, str(made[0] / name))
