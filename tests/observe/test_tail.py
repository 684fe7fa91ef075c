"""Following the event log incrementally (real Delta tables written by EventLog)."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from lakefeed.observe.tail import EventTail, LiveMonitor
from lakefeed.runtime.event_log import EventLog


def test_tail_returns_each_event_once(tmp_path):
    path = tmp_path / "event_log"
    tail = EventTail(path)
    assert tail.poll() == (False, [])  # no log yet
    log = EventLog(path, "iot")
    log.emit("run_start", "go", details={"mode": "once"})
    log.emit("flow_start", "bronze", flow="bronze")
    log.flush()
    reset, first = tail.poll()
    assert not reset
    assert [e["event_type"] for e in first] == ["run_start", "flow_start"]
    assert first[0]["details"] == {"mode": "once"}
    assert tail.poll() == (False, [])
    log.emit("flow_stop", "bronze", flow="bronze")
    log.flush()
    assert [e["event_type"] for e in tail.poll()[1]] == ["flow_stop"]


def test_live_monitor_rebuilds_after_the_log_is_rewritten(tmp_path):
    path = tmp_path / "event_log"
    log = EventLog(path, "iot")
    for flow in ("a", "b"):
        log.emit("flow_start", "s", flow=flow)
    log.flush()
    live = LiveMonitor(path, min_interval=0)
    assert set(live.refresh().pipelines["iot"].flows) == {"a", "b"}
    # compaction-like rewrite: keep only flow b's event, in new files
    kept = DeltaTable(str(path)).to_pyarrow_table()
    kept = kept.filter(pa.compute.equal(kept.column("flow"), "b"))
    write_deltalake(str(path), kept, mode="overwrite")
    monitor = live.refresh()
    assert set(monitor.pipelines["iot"].flows) == {"b"}
    assert monitor.events_seen == 1 and len(live.recent) == 1
