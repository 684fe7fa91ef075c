"""OPTIMIZE, auto compaction and RESTORE on tables with the writer features only lakefeed's own
commits honour (issue 33: ``domainMetadata``, ``clustering``, ``inCommitTimestamp``,
``rowTracking``), made as delta-spark makes them (:func:`make_clustered`). delta-rs refuses
to commit there; lakefeed compacts, clusters (Z-order of the clustering columns,
``clusteringProvider: "liquid"``) and restores in commits of its own, keeping the domains and
writing in-commit timestamps. Rows are checked with delta-rs's kernel reader (``QueryBuilder``)
and lakefeed's readers."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefeed.compat.delta_spark import DeltaTable
from lakefeed.core.errors import ConflictError, code_of
from lakefeed.delta import features, files, log, log_append, log_writer, operations, rewrite
from lakefeed.runtime import compaction
from tests.delta.test_clustered_writes import (
    REFUSED,
    _check_log,
    _check_row_ids,
    _log,
    _rows,
    make_clustered,
)
from tests.delta.test_foreign_tables import _sorted, _spark_rows, expected, python_read

pytestmark = pytest.mark.compat


def _append(root: str, rows: pa.Table) -> int:
    """A blind append through lakefeed's own commit (as a stream batch or a batch write)."""
    written = files.write_batches(root, iter(rows.to_batches()), (), "")
    read = log.latest_version(root)
    assert read is not None
    info = log_append.info("WRITE", False, ())
    row_ids = features.tracks_rows(log.rs_table(root))
    return log_append.commit(root, read, written, False, None, info, row_ids=row_ids)


def _live(root: str) -> dict[str, dict]:
    version = log.latest_version(root)
    assert version is not None
    live = log_writer.live_files(root, version)
    assert live is not None
    return live


def _last_info(root: str) -> dict:
    return next(a["commitInfo"] for a in _log(root)[-1] if "commitInfo" in a)


def _check_optimized(root: str, before: list[tuple]) -> None:
    """The rows are the same, through delta-rs and lakefeed's reader; the last commit is an
    OPTIMIZE whose files changed no data; every live file is clustered, its rows in order of
    the clustering column (one column: the curve is its order)."""
    assert expected(root) == before
    assert _sorted(python_read(root)) == before
    info = _last_info(root)
    assert info["operation"] == "OPTIMIZE"
    assert json.loads(info["operationParameters"]["clusterBy"]) == ["region"]
    changes = [a for a in _log(root)[-1] if "add" in a or "remove" in a]
    assert changes and all(not next(iter(a.values()))["dataChange"] for a in changes)
    for add in _live(root).values():
        assert add["clusteringProvider"] == "liquid"
        regions = pq.read_table(files.local_path(root, add["path"])).column("region").to_pylist()
        assert regions == sorted(regions)
    _check_log(root)


def test_optimize_compacts_and_clusters_a_clustered_table(spark, tmp_path: Path) -> None:
    """SQL ``OPTIMIZE`` on a clustered table with in-commit timestamps and deletion vectors:
    one clustered file, the deleted row purged, the domain kept, timestamps increasing."""
    root = make_clustered(tmp_path / "t")
    for start in (9, 12):
        _append(root, _rows(start, 3))
    DeltaTable.forPath(spark, root).delete("id = 1")
    before = expected(root)
    result = spark.sql(f"OPTIMIZE delta.`{root}`").collect()
    assert result
    assert len(_live(root)) == 1
    assert not any("deletionVector" in add for add in _live(root).values())
    _check_optimized(root, before)
    assert _spark_rows(spark.read.format("delta").load(root)) == before
    version = log.latest_version(root)
    DeltaTable.forPath(spark, root).optimize().executeCompaction()  # all clustered: no commit
    assert log.latest_version(root) == version


def test_a_single_unclustered_file_is_clustered(tmp_path: Path) -> None:
    """A file no OPTIMIZE clustered is rewritten even alone, in order (Spark-free)."""
    root = make_clustered(tmp_path / "t", mode="name")
    operations.optimize(root)
    assert len(_live(root)) == 1
    first = _live(root)
    operations.optimize(root)
    assert _live(root) == first
    target = log.rs_table(root)
    assert expected(root) == _sorted(python_read(root))
    assert log.table_mapping(target).active and len(expected(root)) == 9


def test_zorder_by_on_a_clustered_table_is_refused(spark, tmp_path: Path) -> None:
    root = make_clustered(tmp_path / "t")
    version = log.latest_version(root)
    with pytest.raises(Exception) as error:
        DeltaTable.forPath(spark, root).optimize().executeZOrderBy("id")
    assert code_of(error.value) == "DELTA_CLUSTERING_WITH_ZORDER_BY"
    with pytest.raises(Exception) as error:
        spark.sql(f"OPTIMIZE delta.`{root}` ZORDER BY (amount)").collect()
    assert code_of(error.value) == "DELTA_CLUSTERING_WITH_ZORDER_BY"
    assert log.latest_version(root) == version


def test_optimize_with_row_tracking_on_is_refused(tmp_path: Path) -> None:
    """Rewritten rows must keep their row ids, which lakefeed does not materialize: refused,
    coded, nothing written."""
    root = make_clustered(tmp_path / "t", row_tracking=True)
    version = log.latest_version(root)
    with pytest.raises(Exception) as error:
        operations.optimize(root)
    assert code_of(error.value) == REFUSED and "row tracking" in str(error.value)
    assert log.latest_version(root) == version


def test_an_append_during_optimize_commits_and_optimize_rebases(tmp_path: Path) -> None:
    """Delta's rules: a blind append that wins the race does not conflict with OPTIMIZE (its
    rows stay, in their own file); a DELETE that rewrote a file OPTIMIZE rewrites does."""
    root = make_clustered(tmp_path / "t")
    planned = log.rs_table(root)  # OPTIMIZE read the table here
    _append(root, _rows(40, 2))
    rewrite.compact(planned, root, None, None)
    rows = expected(root)
    assert [r[0] for r in rows if r[0] >= 40] == [40, 41] and len(rows) == 11
    assert len(_live(root)) == 2
    _check_log(root)

    planned = log.rs_table(root)
    operations.delete(root, "id = 40")  # a deletion vector on the appended file
    version = log.latest_version(root)
    with pytest.raises(ConflictError):
        rewrite.compact(planned, root, None, None)
    assert log.latest_version(root) == version and len(expected(root)) == 10


def test_auto_compaction_compacts_and_clusters(spark, tmp_path: Path) -> None:
    root = make_clustered(tmp_path / "t")
    spark.sql(f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES (delta.autoOptimize.autoCompact=true)")
    for start in (9, 12):
        _append(root, _rows(start, 3))
    before = expected(root)
    removed = compaction.compact_if_needed(root, compaction.Policy(min_files=2))
    assert removed == 4
    _check_optimized(root, before)


def test_restore_commits_through_lakefeed(spark, tmp_path: Path) -> None:
    """``RESTORE TABLE ... TO VERSION AS OF`` and ``restoreToVersion`` on a clustered table
    with in-commit timestamps and deletion vectors: the rows of the version, the files added
    back as they were, the clustering domain kept, a later in-commit timestamp."""
    root = make_clustered(tmp_path / "t")
    _append(root, _rows(9, 3))  # version 2
    DeltaTable.forPath(spark, root).delete("id = 1")  # version 3: a deletion vector
    operations.optimize(root)  # version 4
    assert expected(root, 2) != expected(root)
    spark.sql(f"RESTORE TABLE delta.`{root}` TO VERSION AS OF 2").collect()
    assert expected(root) == expected(root, 2)
    assert _spark_rows(spark.read.format("delta").load(root)) == expected(root, 2)
    info = _last_info(root)
    assert info["operation"] == "RESTORE" and info["operationMetrics"]["numRestoredFiles"] == "3"
    changes = [a for a in _log(root)[-1] if "add" in a or "remove" in a]
    assert all(next(iter(a.values()))["dataChange"] for a in changes)
    assert set(_live(root)) == set(log_writer.live_files(root, 2) or {})
    result = DeltaTable.forPath(spark, root).restoreToVersion(3).collect()[0]
    assert expected(root) == expected(root, 3)
    assert result["num_restored_files"] >= 1
    added = [a["add"] for a in _log(root)[-1] if "add" in a]
    assert any("deletionVector" in add for add in added)  # the file with its vector, back
    _check_log(root)


def test_restore_keeps_row_ids_and_refuses_what_it_cannot(tmp_path: Path) -> None:
    """On a row-tracking table the files come back with their own row ids and the high water
    mark stays; a version out of range, or whose files a vacuum deleted, is refused, coded."""
    root = make_clustered(tmp_path / "t", row_tracking=True)
    _append(root, _rows(9, 3))
    operations.restore(root, 1)
    assert expected(root) == expected(root, 1)
    _check_row_ids(root)
    mark = json.loads(log_writer.domain(root, 3, "delta.rowTracking") or "{}")
    assert mark == {"rowIdHighWaterMark": 11}
    version = log.latest_version(root)
    with pytest.raises(Exception) as error:
        operations.restore(root, 99)
    assert code_of(error.value) == "DELTA_CANNOT_RESTORE_TABLE_VERSION"
    restored = next(iter(log_writer.live_files(root, 2) or {}))
    gone = [p for p in log_writer.live_files(root, 2) or {} if p not in _live(root)]
    Path(files.local_path(root, gone[0] if gone else restored)).unlink()
    with pytest.raises(Exception) as error:
        operations.restore(root, 2)
    assert code_of(error.value) == "DELTA_CANNOT_RESTORE_TABLE_VERSION"
    assert log.latest_version(root) == version


def test_replace_where_commits_through_lakefeed(spark, tmp_path: Path) -> None:
    """``replaceWhere`` on a clustered table with deletion vectors: the matching rows are
    marked deleted, the new rows added, one WRITE commit keeping the domain; without deletion
    vectors it is refused, coded, nothing written."""
    root = make_clustered(tmp_path / "t")
    kept = [row for row in expected(root) if row[1] != "eu"]
    frame = spark.createDataFrame(
        [(100, "eu", 1.0), (101, "eu", 2.0)], "id long, region string, amount double"
    )
    frame.write.format("delta").mode("overwrite").option("replaceWhere", "region = 'eu'").save(root)
    rows = expected(root)
    assert rows == sorted(kept + [(100, "eu", 1.0), (101, "eu", 2.0)], key=repr)
    assert _spark_rows(spark.read.format("delta").load(root)) == rows
    info = _last_info(root)
    assert info["operation"] == "WRITE" and info["operationParameters"]["mode"] == "Overwrite"
    assert any("deletionVector" in a.get("add", {}) for a in _log(root)[-1])
    _check_log(root)
    version = log.latest_version(root)
    with pytest.raises(Exception) as error:  # a predicate lakefeed cannot evaluate on Arrow
        frame.write.format("delta").mode("overwrite").option(
            "replaceWhere", "md5(region) IS NOT NULL"
        ).save(root)
    assert code_of(error.value) == "DELTA_UNSUPPORTED_BY_LAKEFEED"
    assert log.latest_version(root) == version

    plain = make_clustered(tmp_path / "plain", dvs=False)
    version = log.latest_version(plain)
    with pytest.raises(Exception) as error:
        frame.write.format("delta").mode("overwrite").option("replaceWhere", "region = 'eu'").save(
            plain
        )
    assert code_of(error.value) == REFUSED and "clustering" in str(error.value)
    assert log.latest_version(plain) == version


def test_zorder_keeps_neighbours_together() -> None:
    """Two clustering columns on a 64 x 64 grid: each run of 16 rows of the curve covers a
    4 x 4 box (a lexicographic sort would cover a 1 x 16 strip)."""
    from lakefeed.delta import zorder

    grid = pa.table({"x": [i % 64 for i in range(4096)], "y": [i // 64 for i in range(4096)]})
    rows = zorder.ordered(grid, ["x", "y"])
    for start in range(0, 4096, 16):
        box = rows.slice(start, 16)
        xs, ys = box.column("x").to_pylist(), box.column("y").to_pylist()
        assert max(xs) - min(xs) == 3 and max(ys) - min(ys) == 3
    assert sorted(rows.to_pylist(), key=repr) == sorted(grid.to_pylist(), key=repr)


def test_restore_sets_the_clustering_columns_of_the_version(tmp_path: Path) -> None:
    """delta-spark's rule: the domains stay as they are now, except the clustering columns,
    which become the restored version's."""
    root = make_clustered(tmp_path / "t")
    domain = {"clusteringColumns": [["id"]]}
    recluster = {
        "domainMetadata": {
            "domain": "delta.clustering",
            "configuration": json.dumps(domain),
            "removed": False,
        }
    }
    info = log_writer.commit_info("CLUSTER BY", {"newClusteringColumns": "id"})
    changed = log_writer.commit_actions(root, 1, [info, recluster], set(), None, rebase=False)
    assert json.loads(log_writer.domain(root, changed, "delta.clustering") or "{}") == domain
    operations.restore(root, 1)
    newest = log.latest_version(root) or 0
    restored = json.loads(log_writer.domain(root, newest, "delta.clustering") or "{}")
    assert restored == {"clusteringColumns": [["region"]]}
    assert expected(root) == expected(root, 1)
    stamps = [next(a["commitInfo"] for a in c if "commitInfo" in a) for c in _log(root)]
    times = [s["inCommitTimestamp"] for s in stamps]
    assert times == sorted(set(times))


def test_lakefeed_table_optimize_clusters(tmp_path: Path) -> None:
    """``lakefeed table optimize`` (delta-rs's compaction before, refused on such tables)."""
    from click.testing import CliRunner

    from lakefeed.cli.main import cli

    root = make_clustered(tmp_path / "t")
    _append(root, _rows(9, 3))
    before = expected(root)
    done = CliRunner().invoke(cli, ["table", "optimize", root])
    assert done.exit_code == 0, done.output
    assert len(_live(root)) == 1
    _check_optimized(root, before)
