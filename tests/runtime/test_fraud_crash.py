"""kill -9 of the fraud example mid-stream, restart, then ``lakefeed verify``: every alert once,
the cards' transformWithState state kept across the restart, late transactions kept once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lakefeed.core.lakehouse import Lakehouse
from tests.pipeline.support import table, write
from tests.runtime.test_fraud import FRAUD, lines, txn
from tests.support.crash import run_cli_with_kills, spark_commits
from tests.support.verify import assert_verify_passes, conf_args

# One file per transactions batch. The 60-minute window and the travel horizon make "span" and
# "travel" alert only when the state from file 1 is still there at file 5.
FILES = [
    [txn("clean-0", 0, "Lisbon"), txn("clean-1", 1), txn("span", 5), txn("span", 6),
     txn("travel", 8, "Lisbon")],
    [*(txn("fast", m) for m in (10, 11, 12, 13)), txn("clean-0", 15, "Lisbon")],
    [txn("clean-1", 22)],
    [txn("clean-2", 35)],
    [txn("span", 50), txn("span", 55), txn("travel", 45, "Singapore")],
    # late for the watermark if alerts read file 5 in an earlier batch: then kept, never alerted
    [*(txn("late", m) for m in (1, 2, 3, 4)), txn("clean-0", 58, "Lisbon")],
]  # fmt: skip
EXPECTED = {
    ("fast", "velocity", "fast@13"),
    ("span", "velocity", "span@55"),
    ("travel", "impossible_travel", "travel@45"),
}
CONF = {"fraud.velocityWindow": "60 minutes", "fraud.maxFilesPerTrigger": "1"}


@pytest.mark.crash
@pytest.mark.soak  # a second pipeline under kill -9: CI's is tests/runtime/test_crash
@pytest.mark.timeout(1200)
def test_kill9_mid_stream_keeps_state_and_alerts_once(spark, tmp_path: Path) -> None:
    lakehouse, landing = Lakehouse.at(tmp_path / "lakehouse"), tmp_path / "landing"
    write(landing, {f"{i}.json": lines(rows) for i, rows in enumerate(FILES, 1)})
    conf = {**CONF, "fraud.landing": str(landing)}
    args = ["run", str(FRAUD), "--lakehouse", str(lakehouse.root), "--master", "local[2]"]
    read = lakehouse.checkpoint_path("transactions")
    at_kill: list[int] = []

    def alerts_committed(_: int) -> bool:
        if spark_commits(lakehouse.checkpoint_path("alerts")) < 1:
            return False
        at_kill.append(spark_commits(read))
        return True

    report = run_cli_with_kills(
        tmp_path,
        [*args, *conf_args(conf)],
        kill_when=alerts_committed,
        min_delay=240,
        max_delay=300,
        final_timeout=600,
    )
    assert report.kills == 1 and at_kill and at_kill[0] < len(FILES), "not killed mid-stream"
    assert table(lakehouse, "transactions").num_rows == sum(map(len, FILES))
    found = table(lakehouse, "alerts").to_pylist()
    alerts = Counter((a["card_id"], a["rule"], a["txn_id"]) for a in found)
    assert max(alerts.values()) == 1, alerts  # each alert once, replayed batches or not
    kept = _kept_late(lakehouse)
    # The burst is late when alerts read file 6 in a later batch than the files before: then
    # the operator never saw (some of) it, which it kept once; else it alerts.
    assert set(kept) <= {f"late@{m}" for m in (1, 2, 3, 4)} and len(set(kept)) == len(kept)
    assert set(alerts) == EXPECTED | (set() if kept else {("late", "velocity", "late@4")})
    assert_verify_passes(FRAUD, lakehouse, conf)


def _kept_late(lakehouse: Lakehouse) -> list[str]:
    if not lakehouse.table_path("alerts_late").exists():  # no row was ever late
        return []
    return [r["txn_id"] for r in table(lakehouse, "alerts_late").to_pylist()]
