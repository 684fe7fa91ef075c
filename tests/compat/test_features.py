"""The compatibility table (:data:`lakefeed.compat.features.FEATURES`) stays true to the code:
every parameter of ``import dlt``'s functions has a row, every refusal is the code's, and every
supported row names a test that exists."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

from lakefeed.compat import dlt
from lakefeed.compat.features import FEATURES
from lakefeed.core.errors import code_of
from lakefeed.pipeline import api

ROOT = Path(__file__).resolve().parents[2]
_CDC = {"create_auto_cdc_flow": api.create_auto_cdc_flow,
        "create_auto_cdc_from_snapshot_flow": api.create_auto_cdc_from_snapshot_flow}  # fmt: skip
_ALIASES = {"apply_changes", "apply_changes_from_snapshot"}  # the same functions' older names


def _id(feature: Any) -> str:
    return f"{feature.api}.{feature.function}.{feature.argument}"


def _parameters(name: str) -> set[str]:
    function = _CDC.get(name, getattr(dlt, name))
    found = {
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    return found | ({"once", "flow_name"} if name in _CDC else set())


def test_every_parameter_of_import_dlt_has_a_row() -> None:
    rows = {(f.function, f.argument) for f in FEATURES if f.api == "dlt"}
    missing = [
        (name, parameter)
        for name in sorted(set(dlt.__all__) - _ALIASES)
        for parameter in ["", *sorted(_parameters(name))]
        if (name, parameter) not in rows
    ]
    assert missing == []


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("feature", FEATURES, ids=_id)
def test_every_supported_row_names_a_test_that_exists(feature) -> None:
    """A refused row may name its test too (the others are refused by the test below)."""
    assert feature.test or feature.status == "refused", feature
    if not feature.test:
        return
    path, _, name = feature.test.partition("::")
    assert (ROOT / path).is_file(), feature
    assert not name or name in _tests_in(ROOT / path), feature


REFUSAL_VALUES: dict[str, Any] = {
    "cluster_by_auto": True,
    "row_filter": "ROW FILTER f ON (x)",
    "once": True,
}


def _declare(function: str, argument: str) -> None:
    value = {argument: REFUSAL_VALUES[argument]}
    if function == "table":
        dlt.table(**value)(lambda: None)
    elif function == "create_streaming_table":
        dlt.create_streaming_table("t", **value)
    elif function == "create_auto_cdc_flow":
        dlt.create_auto_cdc_flow(target="t", source="s", keys=["k"], sequence_by="n", **value)
    else:
        dlt.create_auto_cdc_from_snapshot_flow(target="t", source="s", keys=["k"], **value)


@pytest.mark.parametrize(
    "feature",
    [f for f in FEATURES if f.status == "refused" and f.api == "dlt" and f.function in dlt.__all__],
    ids=_id,
)
def test_every_refused_dlt_row_is_refused_with_its_code(feature) -> None:
    with api.loading(api.Pipeline("refusals")), pytest.raises(Exception) as refused:
        _declare(feature.function, feature.argument)
    assert code_of(refused.value) == feature.code
    assert feature.argument in str(refused.value)
