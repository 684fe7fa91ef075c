from __future__ import annotations

import time

from lakefeed.runtime.event_log import EventLog, read_events


def test_event_log_round_trip_masks_secrets(tmp_path):
    path = tmp_path / "event_log"
    with EventLog(path, "demo", flush_interval=0.05) as log:
        log.emit("run_start", "started", details={"mode": "once", "kafka.sasl.password": "hunter2"})
        log.emit("flow_failed", "boom password=hunter2", flow="f1", level="ERROR")
        time.sleep(0.2)
        log.emit("run_stop", "stopped")
    events = read_events(path)
    assert [e["event_type"] for e in events] == ["run_start", "flow_failed", "run_stop"]
    assert events[0]["details"] == {"mode": "once", "kafka.sasl.password": "***"}
    assert "hunter2" not in events[1]["message"]
    assert [e["flow"] for e in read_events(path, flow="f1")] == ["f1"]
    assert [e["event_type"] for e in read_events(path, limit=1)] == ["run_stop"]
    assert read_events(tmp_path / "missing") == []
