"""AUTO CDC ``once=True`` (DLT's one-off backfill; SQL ``AUTO CDC ONCE INTO``): the history
is applied once, in batch, beside the live stream, and a later run does not apply it again.

The targets are checked against the plain-Python model (tests/cdc/model.py) of the history
and the live changes together: a live change older than the backfilled one for its key (key
3) changes nothing, as a late change in one stream would not.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import lakefeed as lf
from lakefeed.cdc.errors import FLOWS_MIXED
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.run.context import ONCE_DONE
from tests.cdc import model
from tests.pipeline.support import write

PIPELINE = Path(__file__).parent / "once_pipeline"
LIVE = [
    [
        {"id": 1, "seq": 3, "op": "UPSERT", "a": 11, "b": "p2"},
        {"id": 3, "seq": 2, "op": "UPSERT", "a": 99, "b": "stale"},  # older than history's 4
        {"id": 4, "seq": 1, "op": "UPSERT", "a": 40, "b": "t"},
    ],
    [
        {"id": 5, "seq": 2, "op": "DELETE", "a": None, "b": None},
        {"id": 6, "seq": 1, "op": "UPSERT", "a": 60, "b": "u"},
    ],
]


def _history() -> list[dict]:
    """The pipeline file's HISTORY rows, read from its source (importing it declares flows)."""
    tree = ast.parse((PIPELINE / "accounts.py").read_text())
    (rows,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "HISTORY"
    ]
    return [dict(zip(("id", "seq", "op", "a", "b"), row, strict=True)) for row in rows]


@dataclass
class Accounts:
    """The pipeline's lakehouse and landing folder; ``run(n)`` lands live batch ``n`` and runs
    the pipeline (available-now)."""

    spark: Any
    root: Path

    @property
    def conf(self) -> dict[str, str]:
        return {"once.landing": str(self.root / "landing")}

    @property
    def lakehouse(self) -> Lakehouse:
        return Lakehouse.at(self.root / "lakehouse")

    def run(self, number: int) -> Lakehouse:
        landing = self.root / "landing"
        landing.mkdir(exist_ok=True)
        lines = "".join(json.dumps(change) + "\n" for change in LIVE[number])
        (landing / f"{number}.json").write_text(lines)
        ran = lf.run(PIPELINE, lakehouse=self.lakehouse, conf=self.conf, spark=self.spark)
        assert ran.ok, ran
        return self.lakehouse


@pytest.fixture(scope="module")
def accounts(spark, tmp_path_factory: pytest.TempPathFactory) -> Accounts:  # noqa: ANN001
    return Accounts(spark, tmp_path_factory.mktemp("once"))


@pytest.mark.spark
def test_backfill_and_live_changes_give_the_models_tables(accounts: Accounts) -> None:
    lakehouse = accounts.run(0)
    changes = [_history(), LIVE[0]]
    assert model.rows(lakehouse, "accounts", ["id"]) == model.scd1(changes)
    assert model.rows(lakehouse, "accounts_sql", ["id"]) == model.scd1(changes)
    assert model.rows(lakehouse, "accounts_history", ["id", "__START_AT"]) == model.scd2(changes)


@pytest.mark.spark
def test_a_later_run_applies_only_the_live_changes(accounts: Accounts) -> None:
    """The backfill's record keeps it from running again; its Delta txn (app id
    ``lakefeed-once-<flow>``, batch 0) makes a rerun a no-op should the record be lost.
    ``verify`` recomputes each target from the backfill and the live input together."""
    lakehouse = accounts.run(1)
    changes = [_history(), *LIVE]
    assert model.rows(lakehouse, "accounts", ["id"]) == model.scd1(changes)
    assert model.rows(lakehouse, "accounts_history", ["id", "__START_AT"]) == model.scd2(changes)
    backfills = {"accounts_backfill": "accounts", "accounts_sql_backfill": "accounts_sql"}
    for flow, target in backfills.items():
        assert (lakehouse.checkpoint_path(flow) / ONCE_DONE).exists()
        table = DeltaTable(str(lakehouse.table_path(target)))
        assert table.transaction_version(f"lakefeed-once-{flow}") == 0
    check = lf.verify(
        PIPELINE, lakehouse=lakehouse, conf=accounts.conf, spark=accounts.spark, run_first=False
    )
    assert check.ok, [t.note for t in check.tables]
    assert {t.table for t in check.tables} >= {"accounts", "accounts_history", "accounts_sql"}


def test_append_and_auto_cdc_flows_into_one_table_are_refused_with_a_code(tmp_path: Path) -> None:
    folder = write(
        tmp_path / "p",
        {
            "p.py": (
                "import lakefeed as lf\n\n"
                "lf.create_streaming_table('t')\n"
                "lf.create_auto_cdc_flow(target='t', source='s', keys=['id'], sequence_by='n')\n\n"
                "@lf.append_flow(target='t', once=True)\n"
                "def backfill():\n"
                "    return lf.read('s')\n\n"
                "@lf.view\n"
                "def s():\n"
                "    return lf.source('iot')\n"
            )
        },
    )
    with pytest.raises(PipelineError) as refused:
        lf.load_pipeline(folder)
    (problem,) = refused.value.problems
    assert f"[LAKEFEED:{FLOWS_MIXED}]" in problem and "once=True" in problem
