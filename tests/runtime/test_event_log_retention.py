"""Event-log retention: old events pruned, small files compacted, a damaged log left alone."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.core.errors import ConfigError
from lakefeed.runtime.event_log import EVENT_SCHEMA, EventLog, Retention, read_events
from tests.observe.test_damaged_log import damage, write_runs


def _old_run(path: Path, hours_ago: float, events: int = 3) -> None:
    """A run that wrote its events ``hours_ago`` (as an earlier run's flushes did)."""
    stamp = datetime.now(UTC) - timedelta(hours=hours_ago)
    rows = [
        {
            "event_id": f"old{hours_ago}-{i}",
            "timestamp": stamp,
            "pipeline": "iot",
            "run_id": "old",
            "flow": None,
            "event_type": "flow_progress",
            "level": "INFO",
            "message": "old",
            "details": None,
        }
        for i in range(events)
    ]
    write_deltalake(str(path), pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), mode="append")


def _files(path: Path) -> int:
    return len(DeltaTable(str(path)).file_uris())


def test_retention_is_read_from_the_pipeline_configuration() -> None:
    conf = {"lakefeed.eventLog.retention": "7 days", "lakefeed.eventLog.maxEvents": "1000"}
    assert Retention.from_config(conf.get) == Retention(7 * 86400, 1000)
    assert not Retention.from_config({}.get).bounded
    with pytest.raises(ConfigError, match="not a duration") as error:
        Retention.from_config({"lakefeed.eventLog.retention": "a week"}.get)
    assert error.value.fix and "7 days" in error.value.fix
    with pytest.raises(ConfigError, match="maxEvents"):
        Retention.from_config({"lakefeed.eventLog.maxEvents": "-3"}.get)


def test_events_older_than_the_retention_are_pruned_and_files_compacted(tmp_path: Path) -> None:
    path = tmp_path / "event_log"
    for hours in (50, 30, 20):
        _old_run(path, hours)
    log = EventLog(path, "iot", retention=Retention(max_age_s=24 * 3600))
    for i in range(5):
        log.emit("flow_progress", f"batch {i}", flow="bronze")
        log.flush()
    assert _files(path) == 8
    log.maintain()
    kept = read_events(path)
    assert [e["message"] for e in kept] == ["old"] * 3 + [f"batch {i}" for i in range(5)]
    assert _files(path) == 1  # compacted; the replaced files are vacuumed an hour later


def test_a_row_cap_keeps_the_newest_events_while_the_run_writes(tmp_path: Path) -> None:
    path = tmp_path / "event_log"
    retention = Retention(max_events=10)
    with EventLog(
        path, "iot", flush_interval=0.02, retention=retention, maintenance_interval=0.3
    ) as log:  # its own thread flushes and maintains meanwhile
        for i in range(40):
            log.emit("flow_progress", f"batch {i}", flow="bronze")
            time.sleep(0.03)
    messages = [e["message"] for e in read_events(path)]
    assert messages == [f"batch {i}" for i in range(40 - len(messages), 40)]  # newest kept
    assert len(messages) < 40 and log.dropped == 0
    log.maintain()
    assert [e["message"] for e in read_events(path)] == [f"batch {i}" for i in range(30, 40)]
    assert _files(path) == 1


def test_maintenance_leaves_a_damaged_log_as_it_is(tmp_path: Path, capfd) -> None:  # noqa: ANN001
    path = tmp_path / "event_log"
    write_runs(path)
    damage(path, "commit")
    before = sorted(p.name for p in (path / "_delta_log").iterdir())
    log = EventLog(path, "iot", retention=Retention(max_events=1))
    log.maintain()  # no exception: the run goes on
    assert sorted(p.name for p in (path / "_delta_log").iterdir()) == before


def test_a_short_run_with_a_retention_prunes_at_its_start(tmp_path: Path) -> None:
    path = tmp_path / "event_log"
    _old_run(path, 48)
    with EventLog(path, "iot", flush_interval=0.05, retention=Retention(max_age_s=3600)) as log:
        log.emit("run_start", "short run")
        time.sleep(0.5)
    assert [e["message"] for e in read_events(path)] == ["short run"]
