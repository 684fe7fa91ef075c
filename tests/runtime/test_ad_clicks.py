"""The ad_clicks example: a leftOuter stream–stream join, checked against a plain-Python join
for what the watermark has closed, and by ``lakefeed verify``."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.runner import PipelineRunner, RunOptions
from lakefeed.runtime.verify import verify
from lakefeed.spark import offset_log
from tests.pipeline.support import ROOT, load, table

AD_CLICKS = ROOT / "examples" / "ad_clicks"
# 300 impressions of 4 ads, 1 per second from a fixed start (5 minutes), 30% clicked within
# 30 s: the 1-minute watermark passes the 2-minute bound of the first 2 minutes of impressions.
CONF = {
    "adclicks.totalRows": "300",
    "adclicks.rowsPerSecond": "1",
    "adclicks.ads": "4",
    "adclicks.startTime": "2026-01-01T00:00:00Z",
    "adclicks.seed": "11",
    "adclicks.clickRate": "30",
}
BOUND = timedelta(minutes=2)


@pytest.fixture(scope="module")
def ads(spark, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:
    lakehouse = Lakehouse.at(tmp_path_factory.mktemp("ad_clicks") / "lakehouse")
    result = PipelineRunner(
        load([AD_CLICKS], CONF), lakehouse, spark, RunOptions(mode="available-now")
    ).run()
    assert result.ok and result.reason == "completed"
    return lakehouse


def expected(ads: Lakehouse) -> tuple[set[tuple], int]:
    """The join in plain Python: every clicked impression with its click; an unclicked one only
    once the watermark passed impression_time + bound (the rest wait in state: counted)."""
    watermark_ms = offset_log.last_committed(ads.checkpoint_path("gold_ad_clicks")).watermark_ms
    clicks = {
        (c["click_impression_id"], c["click_ad_id"]): c["click_time"]
        for c in table(ads, "clicks").to_pylist()
    }
    rows, waiting = set(), 0
    for i in table(ads, "impressions").to_pylist():
        start = i["impression_time"]
        click = clicks.get((i["impression_id"], i["ad_id"]))
        if click is not None and not start <= click <= start + BOUND:
            click = None
        expires = start + BOUND
        if click is None and expires.timestamp() * 1000 > watermark_ms:
            waiting += 1
            continue
        rows.add((i["impression_id"], i["ad_id"], start, click, click is not None, expires))
    return rows, waiting


@pytest.mark.spark
def test_join_matches_a_plain_python_join(ads: Lakehouse) -> None:
    gold = table(ads, "gold_ad_clicks").to_pylist()
    got = [tuple(r.values()) for r in gold]
    rows, waiting = expected(ads)
    assert len(got) == len(set(got))  # each impression once
    assert set(got) == rows
    clicked = sum(r["clicked"] for r in gold)
    assert 0 < clicked < len(gold)  # matched rows and unmatched ones the watermark closed
    assert waiting > 0  # the newest unclicked impressions still wait for a click


@pytest.mark.spark
def test_verify_passes(spark, ads: Lakehouse) -> None:
    diffs = {d.table: d for d in verify(load([AD_CLICKS], CONF), ads, spark, run_first=False)}
    assert all(d.equal for d in diffs.values()), {n: (d.note, d.samples) for n, d in diffs.items()}
    assert diffs["gold_ad_clicks"].pending == expected(ads)[1]
