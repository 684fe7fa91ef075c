"""Column pruning and filter pushdown for lakefeed's Arrow reader: the decisions read from a
query plan, and the reader's rows with and without them (Spark-free)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakefeed.connectors.files.filelog import FileEntry
from lakefeed.connectors.files.options import FileSourceOptions
from lakefeed.connectors.files.plan import ReadPlan
from lakefeed.connectors.files.pushdown import NONE, Predicate, Pushdown, from_plan
from lakefeed.connectors.files.readers import predicate_mask, read_entry
from lakefeed.connectors.files.schemas import parse_ddl

# ------------------------------------------------------------- Catalyst's toJSON, by hand
# The shapes below are those Spark 4.3's TreeNode.toJSON gives (checked on a running query):
# a pre-order list of nodes with "num-children"; expressions nested as their own lists.

_CATALYST = "org.apache.spark.sql.catalyst."


def _attr(name: str, ident: int, dtype: str = "string") -> list[dict[str, Any]]:
    return [
        {
            "class": _CATALYST + "expressions.AttributeReference",
            "num-children": 0,
            "name": name,
            "dataType": dtype,
            "exprId": {"id": ident, "jvmId": "j"},
        }
    ]


def _lit(value: Any, dtype: str = "string") -> list[dict[str, Any]]:
    return [
        {
            "class": _CATALYST + "expressions.Literal",
            "num-children": 0,
            "value": value,
            "dataType": dtype,
        }
    ]


def _call(kind: str, *args: list[dict[str, Any]]) -> list[dict[str, Any]]:
    node = {"class": _CATALYST + "expressions." + kind, "num-children": len(args)}
    return [node, *(part for arg in args for part in arg)]


def _alias(expr: list[dict[str, Any]], name: str, ident: int) -> list[dict[str, Any]]:
    node = {
        "class": _CATALYST + "expressions.Alias",
        "num-children": 1,
        "name": name,
        "exprId": {"id": ident, "jvmId": "j"},
    }
    return [node, *expr]


SOURCE = [("a", 1, "string"), ("b", 2, "long"), ("c", 3, "string"), ("_metadata", 4, "struct")]


def _leaf(columns: list[tuple[str, int, str]] = SOURCE) -> dict[str, Any]:
    return {
        "class": "org.apache.spark.sql.execution.streaming.runtime.StreamingExecutionRelation",
        "num-children": 0,
        "source": None,
        "output": [_attr(*column) for column in columns],
    }


def _filter(condition: list[dict[str, Any]]) -> dict[str, Any]:
    return {"class": _CATALYST + "plans.logical.Filter", "num-children": 1, "condition": condition}


def _project(*items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "class": _CATALYST + "plans.logical.Project",
        "num-children": 1,
        "projectList": list(items),
    }


def _write() -> dict[str, Any]:
    return {
        "class": "org.apache.spark.sql.execution.streaming.sources.WriteToMicroBatchDataSource",
        "num-children": 1,
    }


NAMES = [name for name, _, _ in SOURCE]


def _plan_json(*nodes: dict[str, Any]) -> str:
    return json.dumps(list(nodes))


def test_projection_and_filters_below_it_are_pushed() -> None:
    condition = _call(
        "And",
        _call("IsNotNull", _attr("a", 1)),
        _call(
            "And",
            _call("EqualTo", _attr("a", 1), _lit("view")),
            _call("LessThan", _lit(5, "long"), _attr("b", 2, "long")),
        ),
    )
    plan = _plan_json(
        _write(),
        _project(_attr("b", 2, "long"), _alias(_call("Upper", _attr("c", 3)), "cc", 9)),
        _filter(condition),
        _leaf(),
    )
    pushdown = from_plan(plan, NAMES)
    assert pushdown.columns == {"a", "b", "c"}
    assert pushdown.filters == (
        Predicate("notnull", "a"),
        Predicate("eq", "a", "view"),
        Predicate("gt", "b", 5),  # 5 < b, sides swapped
    )
    assert pushdown.not_pushed == ()


def test_filters_spark_alone_evaluates_exactly_are_kept_in_spark() -> None:
    condition = _call(
        "And",
        _call("EqualTo", _call("Upper", _attr("a", 1)), _lit("X")),  # a function of a column
        _call(
            "And",
            _call("EqualTo", _attr("a", 1), _attr("c", 3)),  # two columns
            _call("EqualTo", _attr("b", 2, "long"), _lit(1, "integer")),
        ),  # other type
    )
    pushdown = from_plan(
        _plan_json(_project(_attr("b", 2, "long")), _filter(condition), _leaf()), NAMES
    )
    assert pushdown.filters == ()
    assert pushdown.not_pushed == ("EqualTo", "EqualTo", "EqualTo")
    assert pushdown.columns == {"a", "b", "c"}  # what the kept filters read is still read


def test_no_projection_means_every_column_and_filters_above_one_stay() -> None:
    only_filter = _plan_json(_write(), _filter(_call("IsNull", _attr("c", 3))), _leaf())
    assert from_plan(only_filter, NAMES) == Pushdown(None, (Predicate("null", "c"),))
    above = _plan_json(
        _filter(_call("EqualTo", _attr("a", 1), _lit("x"))), _project(_attr("a", 1)), _leaf()
    )
    assert from_plan(above, NAMES) == Pushdown(frozenset({"a"}), ())


def test_in_and_starts_with_and_metadata_columns() -> None:
    condition = _call(
        "And",
        _call("In", _attr("a", 1), _lit("x"), _lit("y")),
        _call("StartsWith", _attr("c", 3), _lit("pre")),
    )
    plan = _plan_json(
        _project(_alias(_call("GetStructField", _attr("_metadata", 4, "struct")), "f", 8)),
        _filter(condition),
        _leaf(),
    )
    pushdown = from_plan(plan, NAMES)
    assert pushdown.columns == {"a", "c", "_metadata"}
    assert pushdown.filters == (
        Predicate("in", "a", ("x", "y")),
        Predicate("startswith", "c", "pre"),
    )


def test_no_or_several_matching_sources_narrow_nothing() -> None:
    other = _leaf([("x", 7, "string")])
    assert from_plan(_plan_json(_project(_attr("x", 7)), other), NAMES) is NONE
    union = {"class": _CATALYST + "plans.logical.Union", "num-children": 2}
    twice = _plan_json(union, _project(_attr("a", 1)), _leaf(), _leaf())
    assert from_plan(twice, NAMES) is NONE


# ------------------------------------------------------------------------ Arrow evaluation


@pytest.mark.parametrize(
    ("predicate", "expected"),
    [
        (Predicate("eq", "v", "b"), [False, True, None, False]),
        (Predicate("lt", "v", "b"), [True, False, None, False]),
        (Predicate("ge", "v", "b"), [False, True, None, True]),
        (Predicate("in", "v", ("a", "c")), [True, False, None, True]),
        (Predicate("null", "v"), [False, False, True, False]),
        (Predicate("notnull", "v"), [True, True, False, True]),
        (Predicate("startswith", "v", "c"), [False, False, None, True]),
    ],
)
def test_predicates_are_null_where_spark_is(predicate: Predicate, expected: list) -> None:
    column = pa.array(["a", "b", None, "c"])
    assert predicate_mask(column, predicate).to_pylist() == expected


# ------------------------------------------------------------------- the reader, narrowed


def _plan(
    tmp: Path,
    fmt: str,
    pushdown: Pushdown,
    rescue: str | None = None,
    mode: str = "none",
    **extra: str,
) -> ReadPlan:
    opts = FileSourceOptions.parse({"path": str(tmp), "cloudFiles.format": fmt, **extra})
    data = parse_ddl("kind STRING, n BIGINT, note STRING")
    return ReadPlan(opts, data, mode, rescue, True, str(tmp / "schema"), pushdown)


def _read(path: Path, plan: ReadPlan) -> list[dict[str, Any]]:
    stat = path.stat()
    entry = FileEntry(str(path), stat.st_size, stat.st_mtime_ns // 1_000_000)
    batches = list(read_entry(entry, plan))
    assert all(batch.schema == plan.kept_arrow for batch in batches)
    return pa.Table.from_batches(batches, plan.kept_arrow).to_pylist() if batches else []


VIEWS = Pushdown(frozenset({"kind", "n"}), (Predicate("eq", "kind", "view"),))


def _lines(path: Path, *records: Any) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_json_parses_only_used_columns_and_drops_filtered_rows(tmp_path: Path) -> None:
    path = _lines(
        tmp_path / "a.json",
        {"kind": "view", "n": 1, "note": 5, "extra": [1]},  # note mistyped, extra unknown
        {"kind": "click", "n": 2, "note": "x"},
        {"kind": "view", "n": 3},
    )
    full = _read(path, _plan(tmp_path, "json", NONE, rescue="_rescued_data"))
    assert [r["n"] for r in full] == [1, 2, 3] and full[0]["_rescued_data"] is not None
    narrowed = _read(path, _plan(tmp_path, "json", VIEWS))
    assert narrowed == [{"kind": "view", "n": 1}, {"kind": "view", "n": 3}]
    with_rescue = _read(path, _plan(tmp_path, "json", VIEWS, rescue="_rescued_data"))
    assert with_rescue == narrowed  # a rescued-data column the flow does not read is not built


def test_json_rescue_read_by_the_flow_parses_everything(tmp_path: Path) -> None:
    path = _lines(tmp_path / "a.json", {"kind": "view", "n": "two", "note": "x"}, "{broken")
    used = replace(VIEWS, columns=frozenset({"kind", "n", "_rescued_data"}))
    rows = _read(path, _plan(tmp_path, "json", used, rescue="_rescued_data"))
    assert rows[0]["n"] is None and json.loads(rows[0]["_rescued_data"])["n"] == "two"
    assert len(rows) == 1  # the broken line has a null kind: the filter drops it, as Spark's


def test_json_variant_in_case_of_a_used_column_is_never_dropped_silently(tmp_path: Path) -> None:
    path = _lines(tmp_path / "a.json", {"kind": "view", "N": 7})
    with pytest.raises(Exception, match="do not fit the schema"):
        _read(path, _plan(tmp_path, "json", VIEWS))
    rescued = _read(
        path,
        _plan(
            tmp_path,
            "json",
            replace(VIEWS, columns=frozenset({"kind", "n", "_rescued_data"})),
            rescue="_rescued_data",
        ),
    )
    assert json.loads(rescued[0]["_rescued_data"])["N"] == 7


def test_schema_evolution_still_sees_new_columns(tmp_path: Path) -> None:
    from lakefeed.connectors.files.errors import NewColumnsError

    path = _lines(tmp_path / "a.json", {"kind": "view", "n": 1, "fresh": True})
    with pytest.raises(NewColumnsError):
        _read(path, _plan(tmp_path, "json", VIEWS, mode="failOnNewColumns"))


def test_csv_and_parquet_read_only_used_columns(tmp_path: Path) -> None:
    csv = tmp_path / "a.csv"
    csv.write_text("kind,n,note\nview,1,x\nclick,2,y\nview,3,z\n")
    assert _read(csv, _plan(tmp_path, "csv", VIEWS, header="true")) == [
        {"kind": "view", "n": 1},
        {"kind": "view", "n": 3},
    ]
    parquet = tmp_path / "a.parquet"
    pq.write_table(pa.table({"kind": ["view", "click"], "n": [1, 2], "note": ["x", "y"]}), parquet)
    assert _read(parquet, _plan(tmp_path, "parquet", VIEWS)) == [{"kind": "view", "n": 1}]
    meta_only = Pushdown(frozenset({"_metadata"}))
    rows = _read(parquet, _plan(tmp_path, "parquet", meta_only))
    assert [r["_metadata"]["file_name"] for r in rows] == ["a.parquet", "a.parquet"]


def test_corrupt_file_is_skipped_or_fails_as_without_pushdown(tmp_path: Path) -> None:
    from lakefeed.connectors.files.errors import UnreadableFileError

    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(UnreadableFileError):
        _read(bad, _plan(tmp_path, "parquet", VIEWS))
    assert _read(bad, _plan(tmp_path, "parquet", VIEWS, ignoreCorruptFiles="true")) == []


def test_arrow_reader_is_chosen_only_when_asked_for(tmp_path: Path) -> None:
    from lakefeed.connectors.files.spark_read import ahead, choose

    arrow = {"lakefeed.reader": "arrow"}
    assert ahead(arrow, spark_available=True, reaches_files=False) is None  # its own clients
    assert ahead(arrow, spark_available=False).reader == "python"  # no planned streams
    rescued = _plan(tmp_path, "json", NONE, rescue="_rescued_data", mode="rescue")
    assert choose(rescued, arrow).reader == "arrow"  # everything lakefeed's reader does
    assert choose(rescued, {}).reader == "python"  # the default is unchanged
