"""Exactly-once from Kafka into Delta although the driver is killed -9 mid-stream, repeatedly."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.connectors.kafka.broker import Tansu
from tests.support.crash import run_driver_with_kills

DRIVER = Path(__file__).with_name("crash_driver.py")


def _version(table: Path) -> int:
    try:
        return DeltaTable(str(table)).version()
    except Exception:
        return -1


@pytest.mark.crash
@pytest.mark.timeout(900)  # four JVM starts; slow when the machine is shared
def test_kill_9_mid_stream_then_restart_writes_each_message_once(
    broker: Tansu, tmp_path: Path
) -> None:
    topic = broker.create_topic(3)
    total = 12_000
    broker.produce(topic, [f"m{i}" for i in range(total)], keys=[str(i) for i in range(total)])
    table, checkpoint = tmp_path / "table", tmp_path / "cp"
    marks: dict[int, int] = {}

    def committed_more(kill: int) -> bool:
        # Kill only once this run has committed a batch: mid-stream, not during JVM start.
        version = _version(table)
        start = marks.setdefault(kill, version)
        return version >= start + 1

    report = run_driver_with_kills(
        DRIVER,
        broker.bootstrap,
        topic,
        table,
        checkpoint,
        workdir=tmp_path,
        kills=3,
        kill_when=committed_more,
        min_delay=90.0,
        max_delay=120.0,
        final_timeout=300.0,
    )
    assert report.kills >= 2, report
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    assert len(rows) == total
    assert sorted(r["value"] for r in rows) == sorted(f"m{i}" for i in range(total))
    assert len({(r["partition"], r["offset"]) for r in rows}) == total
