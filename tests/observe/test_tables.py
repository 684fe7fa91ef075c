"""Live table views read with delta-rs: summary, newest rows, time charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakefeed.observe.tables import TableReader, TableViewError

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")


def gold_batch(first_window: int, windows: int) -> pa.Table:
    """Rows like a 5-minute gold aggregate: window struct, device, average temperature."""
    starts = [T0 + timedelta(minutes=5 * (first_window + k)) for k in range(windows)]
    window = pa.StructArray.from_arrays(
        [pa.array(starts, TS), pa.array([s + timedelta(minutes=5) for s in starts], TS)],
        names=["start", "end"],
    )
    return pa.table(
        {
            "window": window,
            "device": ["d1"] * windows,
            "avg_temp": [20.0 + first_window + k for k in range(windows)],
            "readings": pa.array([10] * windows, pa.int64()),
        }
    )


@pytest.fixture
def reader(lakehouse):
    path = str(lakehouse.table_path("gold"))
    write_deltalake(path, gold_batch(0, 6), mode="append")
    write_deltalake(path, gold_batch(6, 2), mode="append")
    return TableReader(lakehouse)


def test_summary_lists_chartable_columns(reader):
    (summary,) = reader.summaries()
    assert (summary["name"], summary["version"], summary["rows"], summary["files"]) == (
        "gold",
        1,
        8,
        2,
    )
    assert summary["time_columns"] == ["window.start", "window.end"]
    assert summary["measures"] == ["avg_temp", "readings"]


def test_latest_rows_come_from_the_newest_commit(reader, lakehouse):
    latest = reader.latest_rows("gold", limit=2, order_by="window.start")
    assert latest["columns"] == ["window", "device", "avg_temp", "readings"]
    assert [row[2] for row in latest["rows"]] == [27.0, 26.0]
    assert latest["rows"][0][0]["start"] == (T0 + timedelta(minutes=35)).isoformat()
    write_deltalake(str(lakehouse.table_path("gold")), gold_batch(8, 1), mode="append")
    assert reader.latest_rows("gold", limit=1)["rows"][0][2] == 28.0  # handle refreshed


def test_chart_buckets_a_measure_over_time(reader):
    raw = reader.chart("gold", time="window.start", measure="avg_temp")
    assert raw["t"][0] == T0.timestamp() and len(raw["t"]) == 8
    assert raw["y"] == [20.0 + k for k in range(8)]
    hourly = reader.chart("gold", "window.start", "avg_temp", agg="max", bucket_s=1800)
    assert hourly["t"] == [T0.timestamp(), T0.timestamp() + 1800]
    assert hourly["y"] == [25.0, 27.0]
    counts = reader.chart("gold", "window.start", "device", agg="count", bucket_s=3600, points=1)
    assert counts["y"] == [8]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"time": "nope", "measure": "avg_temp"}, "no column 'nope'"),
        ({"time": "avg_temp", "measure": "avg_temp"}, "not a timestamp"),
        ({"time": "window.start", "measure": "device"}, "not a numeric"),
        ({"time": "window.start", "measure": "avg_temp", "agg": "median"}, "agg must be"),
    ],
)
def test_bad_chart_requests_say_why(reader, kwargs, message):
    with pytest.raises(TableViewError, match=message):
        reader.chart("gold", **kwargs)


def test_unknown_table_is_refused(reader):
    with pytest.raises(TableViewError, match="no table 'silver'"):
        reader.summary("silver")
