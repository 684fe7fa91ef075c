"""Spark-free housekeeping: lakefeed.delta.table and ``lakefeed table ...``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

from lakefeed.cli.main import cli
from lakefeed.delta import table


def _small_files(path: Path, count: int = 4) -> None:
    for i in range(count):
        write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")


def test_is_empty_info_truncate(tmp_path: Path) -> None:
    path = tmp_path / "t"
    assert table.is_empty(path) and not table.exists(path)
    assert table.truncate(path) is None
    _small_files(path, 2)
    assert not table.is_empty(path)
    assert table.info(path).rows == 2 and table.info(path).files == 2
    assert table.truncate(path) == 2
    assert table.is_empty(path)
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 0
    assert table.history(path, 1)[0]["operation"] == "DELETE"


def test_cli_history_optimize_vacuum(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _small_files(path)
    runner = CliRunner()
    shown = runner.invoke(cli, ["table", "history", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "WRITE" in shown.output and "History of" in shown.output

    optimized = runner.invoke(cli, ["table", "optimize", str(path)])
    assert optimized.exit_code == 0, optimized.output
    assert table.info(path).files == 1
    assert sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3]

    refused = runner.invoke(cli, ["table", "vacuum", str(path), "--retain-hours", "0"])
    assert refused.exit_code != 0 and "below the safe default" in refused.output
    dry = runner.invoke(cli, ["table", "vacuum", str(path), "--retain-hours", "0", "--force"])
    assert dry.exit_code == 0 and "would delete 4 file(s)" in dry.output
    assert len(list(path.glob("*.parquet"))) == 5
    applied = runner.invoke(
        cli, ["table", "vacuum", str(path), "--retain-hours", "0", "--force", "--apply"]
    )
    assert applied.exit_code == 0 and "deleted 4 file(s)" in applied.output
    assert len(list(path.glob("*.parquet"))) == 1
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 4

    missing = runner.invoke(cli, ["table", "history", str(tmp_path / "nope")])
    assert missing.exit_code != 0 and "not a Delta table" in missing.output


def test_one_row_count_rule_for_files_without_statistics(tmp_path: Path) -> None:
    """A file whose add action has no numRecords makes the count unknown, everywhere."""
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    from lakefeed.cli.pipeline import table_rows
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.observe.tables import TableReader

    lakehouse = Lakehouse(tmp_path)
    path = lakehouse.table_path("t")
    _small_files(path, 1)
    pq.write_table(pa.table({"id": pa.array([7, 8], pa.int64())}), path / "bare.parquet")
    bare = AddAction("bare.parquet", (path / "bare.parquet").stat().st_size, {}, 0, True, None)
    DeltaTable(str(path)).create_write_transaction([bare], "append", DeltaTable(str(path)).schema())
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == 3
    assert table.row_count(path) is None and table.info(path).rows is None
    assert table.has_rows(path) and not table.is_empty(path)
    assert TableReader(lakehouse).row_count("t") is None
    assert table_rows(lakehouse, "t") == "?"  # was 1: the file without statistics counted as 0
    assert table.row_count(tmp_path / "none") == 0 and table_rows(lakehouse, "none") == "0"
