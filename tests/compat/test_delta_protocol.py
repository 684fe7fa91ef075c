"""Protocol changes (``upgradeTableProtocol``, ``addFeatureSupport``) over delta-rs, Spark-free:
what lakefeed allows leaves a table delta-rs still writes, implied legacy features are kept."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.compat.delta_spark import protocol
from lakefeed.core.errors import code_of


def _table(tmp_path: Path) -> str:
    root = str(tmp_path / "t")
    write_deltalake(root, pa.table({"a": [1]}))
    return root


def test_a_legacy_table_keeps_its_implied_features_and_stays_writable(tmp_path: Path) -> None:
    root = _table(tmp_path)
    protocol.upgrade(DeltaTable(root), root, 1, 4)
    protocol.add_feature(DeltaTable(root), root, "timestampNtz")
    table = DeltaTable(root)
    versions = table.protocol()
    assert (versions.min_reader_version, versions.min_writer_version) == (3, 7)
    assert set(versions.writer_features or []) == {
        "appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns",
        "timestampNtz",
    }  # fmt: skip
    write_deltalake(root, pa.table({"a": [2]}), mode="append")
    DeltaTable(root).delete("a = 1")
    assert DeltaTable(root).to_pyarrow_table().column("a").to_pylist() == [2]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda t, r: protocol.upgrade(t, r, 1, 6), "DELTA_UNSUPPORTED_BY_LAKEFEED"),
        (lambda t, r: protocol.upgrade(t, r, 3, 7), "DELTA_UNSUPPORTED_BY_LAKEFEED"),
        (lambda t, r: protocol.upgrade(t, r, 1, 8), "DELTA_UNSUPPORTED_PROTOCOL_VERSION"),
        (
            lambda t, r: protocol.add_feature(t, r, "domainMetadata"),
            "DELTA_UNSUPPORTED_BY_LAKEFEED",
        ),
        (
            lambda t, r: protocol.add_feature(t, r, "identityColumns"),
            "DELTA_UNSUPPORTED_BY_LAKEFEED",
        ),
        (lambda t, r: protocol.add_feature(t, r, "rowTracking"), "DELTA_UNSUPPORTED_BY_LAKEFEED"),
    ],
)
def test_changes_that_would_strand_the_table_are_refused_before_a_commit(
    tmp_path: Path, change, code: str
) -> None:
    root = _table(tmp_path)
    with pytest.raises(Exception) as error:
        change(DeltaTable(root), root)
    assert code_of(error.value) == code
    assert DeltaTable(root).version() == 0


def test_column_mapping_implied_by_reader_2_is_listed(tmp_path: Path) -> None:
    root = _table(tmp_path)
    protocol.upgrade(DeltaTable(root), root, 2, 5)
    protocol.add_feature(DeltaTable(root), root, "appendOnly")
    upgraded = DeltaTable(root).protocol()
    assert "columnMapping" in (upgraded.reader_features or [])
    assert "columnMapping" in (upgraded.writer_features or [])


def test_table_properties_that_change_the_protocol_are_checked() -> None:
    fine = {"delta.appendOnly": "true", "delta.enableDeletionVectors": "true", "own": "x"}
    protocol.check_properties("t", fine | {"delta.columnMapping.mode": "none"})
    protocol.check_properties("t", {"delta.columnMapping.mode": "name"})
    protocol.check_properties("t", {"delta.enableRowTracking": "true"})  # lakefeed turns it on
    protocol.check_properties("t", {"delta.minReaderVersion": "2", "delta.minWriterVersion": "5"})
    for key, value in [
        ("delta.columnMapping.mode", "position"),
        ("delta.feature.appendOnly", "supported"),
        ("delta.minWriterVersion", "7"),
    ]:
        with pytest.raises(Exception, match=key) as error:
            protocol.check_properties("t", {key: value})
        assert code_of(error.value) == "DELTA_UNSUPPORTED_BY_LAKEFEED"
