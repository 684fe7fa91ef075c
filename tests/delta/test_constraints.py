"""CHECK constraints and column invariants (issues 31 and 33), Spark-free: the table's checks as
any writer sets them, the Python sink's DataFusion check with Delta's error and the row's values,
and a commit refused when the table got a constraint its files were not checked against."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, Field, Schema, write_deltalake

from lakefeed.compat.delta_spark.sql.parse import AddConstraint, DropConstraint, parse
from lakefeed.core.errors import code_of
from lakefeed.delta import commit, constraints, features, files


def _orders(root: Path) -> DeltaTable:
    write_deltalake(str(root), pa.table({"id": [1, 2], "amount": [5.0, 6.0]}))
    table = DeltaTable(str(root))
    table.alter.add_constraint({"amount_pos": "amount > 0"})  # as delta-rs users set them
    return DeltaTable(str(root))


def test_checks_come_from_properties_and_column_invariants(tmp_path: Path) -> None:
    table = _orders(tmp_path / "t")
    checks = constraints.of_table(table.metadata().configuration, table.schema())
    assert checks == (("amount_pos", "amount > 0"),)
    invariant = {"delta.invariants": json.dumps({"expression": {"expression": "x > 3"}})}
    schema = Schema([Field("x", "integer", metadata=invariant)])
    assert constraints.of_table({}, schema) == (("EXPRESSION(x > 3)", "x > 3"),)


def test_the_python_sink_checks_each_batch_with_datafusion(tmp_path: Path) -> None:
    checks = (("amount_pos", "amount > 0"), ("EXPRESSION(id < 10)", "id < 10"))
    good = pa.record_batch({"id": [1, 2], "amount": [1.0, 2.0], "note": ["a", "b"]})
    constraints.check_arrow(good, checks, "/t")
    for bad, text in (
        ({"id": [1, 3], "amount": [1.0, -2.5]}, "CHECK constraint amount_pos (amount > 0)"),
        ({"id": [1, 3], "amount": [1.0, None]}, " - amount : null"),  # null fails, as in Delta
        ({"id": [12], "amount": [1.0]}, "CHECK constraint EXPRESSION(id < 10) (id < 10)"),
    ):
        with pytest.raises(Exception) as error:
            constraints.check_arrow(pa.record_batch(bad), checks, "/t")
        assert code_of(error.value) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
        assert text in str(error.value) and "violated by row with values:" in str(error.value)
    with pytest.raises(Exception, match=r" - amount : -2.5"):
        constraints.check_arrow(pa.record_batch({"id": [3], "amount": [-2.5]}), checks, "/t")


def test_a_commit_refuses_files_checked_against_fewer_constraints(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = _orders(root)
    rows = pa.record_batch({"id": [3], "amount": [7.0]})
    written = files.write_batches(str(root), iter([rows]), (), "x-")
    unchecked = commit.WriteSpec(str(root), "append", ())
    with pytest.raises(Exception) as error:
        commit.commit_files(unchecked, written, rows.schema)
    assert code_of(error.value) == "DELTA_CONSTRAINTS_CHANGED"
    checked = commit.WriteSpec(str(root), "append", (), checks=(("amount_pos", "amount > 0"),))
    assert commit.commit_files(checked, written, rows.schema).version == table.version() + 1


def test_alter_table_constraints_parse() -> None:
    add = parse("ALTER TABLE delta.`/t` ADD CONSTRAINT amountPos CHECK (amount > 0 AND id > 0)")
    assert isinstance(add, AddConstraint)
    assert (add.name, add.expression) == ("amountPos", "amount > 0 AND id > 0")
    keep = parse("ALTER TABLE t ADD CONSTRAINT c CHECK ((a > 0) OR (b > 0))")
    assert isinstance(keep, AddConstraint) and keep.expression == "(a > 0) OR (b > 0)"
    drop = parse("ALTER TABLE t DROP CONSTRAINT IF EXISTS c")
    assert isinstance(drop, DropConstraint) and (drop.name, drop.if_exists) == ("c", True)


def test_delta_rs_violations_read_as_deltas_error(tmp_path: Path) -> None:
    table = _orders(tmp_path / "t")
    with pytest.raises(Exception) as raised:
        table.update({"amount": "-1.0"}, predicate="id = 1")
    assert constraints.rs_violation(raised.value)
    error = constraints.translate_rs(raised.value, (("amount_pos", "amount > 0"),), "/t")
    assert code_of(error) == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert " - amount : -1.0" in str(error) and "amount_pos (amount > 0)" in str(error)


def _with_writer_feature(root: Path, feature: str) -> DeltaTable:
    """A table whose protocol, as another writer committed it, carries ``feature``."""
    write_deltalake(str(root), pa.table({"id": [1, 2]}))
    action = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": [feature]}
    (root / "_delta_log" / f"{1:020d}.json").write_text(
        json.dumps({"protocol": action}) + "\n" + json.dumps({"commitInfo": {}}) + "\n"
    )
    return DeltaTable(str(root))


def test_writer_features_lakefeed_lacks_are_refused_before_writing(tmp_path: Path) -> None:
    """Issue 33: column defaults (or any writer feature lakefeed cannot honour) refuse a write
    with a code naming the feature, never CONFLICT/retry, and before any file is committed."""
    root = tmp_path / "t"
    table = _with_writer_feature(root, "allowColumnDefaults")
    assert features.unwritable(table) == ["allowColumnDefaults"]
    with pytest.raises(Exception) as error:
        features.check_writable(table, str(root), "DELETE")
    assert code_of(error.value) == "DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED"
    assert "allowColumnDefaults" in str(error.value) and "retry" not in str(error.value)
    rows = pa.record_batch({"id": [3]})
    written = files.write_batches(str(root), iter([rows]), (), "x-")
    with pytest.raises(Exception) as error:
        commit.commit_files(commit.WriteSpec(str(root), "append", ()), written, rows.schema)
    assert code_of(error.value) == "DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED"
    assert DeltaTable(str(root)).version() == 1
    with pytest.raises(Exception) as raised:
        table.delete("id = 1")  # delta-rs's own refusal, at its commit
    translated = features.translate_rs(raised.value, str(root), "DELETE")
    assert code_of(translated) == "DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED"
    assert features.unwritable(_with_writer_feature(tmp_path / "ok", "checkConstraints")) == []
