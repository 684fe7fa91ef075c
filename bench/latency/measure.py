"""End-to-end latency from a Delta table's own log: event creation → row visible to readers.

A row becomes visible when the commit file ``_delta_log/<version>.json`` that adds its data
file appears; that file's modification time is the moment any reader could see the row. The
row's creation time is its ``event_time`` (the producer stamps it at send time, as yahoo's
generator does). Spark-free: this runs after the pipeline has stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def committed_rows(table: Path) -> int:
    """Rows the table's commits added so far (from the data files' Parquet footers)."""
    total = 0
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for add in _adds(commit):
            total += pq.ParquetFile(table / unquote(add["path"])).metadata.num_rows
    return total


def _adds(commit: Path) -> list[dict]:
    actions = (json.loads(line) for line in commit.read_text().splitlines() if line)
    return [a["add"] for a in actions if "add" in a and a["add"].get("dataChange", True)]


def row_latencies_ms(table: Path, time_column: str = "event_time") -> tuple[np.ndarray, np.ndarray]:
    """``(created_ms, latency_ms)`` of every row of the Delta table at ``table``."""
    created: list[np.ndarray] = []
    latency: list[np.ndarray] = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        visible_ms = commit.stat().st_mtime_ns / 1e6
        for add in _adds(commit):
            column = pq.read_table(table / unquote(add["path"]), columns=[time_column])[time_column]
            ms = pc.cast(pc.cast(column, pa.timestamp("ms", tz="UTC")), pa.int64())
            values = ms.to_numpy(zero_copy_only=False).astype(np.float64)
            created.append(values)
            latency.append(visible_ms - values)
    if not created:
        return np.empty(0), np.empty(0)
    return np.concatenate(created), np.concatenate(latency)


@dataclass(frozen=True)
class LatencyStats:
    rows: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    early_p50_ms: float
    late_p50_ms: float

    @property
    def falling_behind(self) -> bool:
        """Latency that grows over the run means the pipeline does not keep up."""
        return self.late_p50_ms > 2 * self.early_p50_ms + 1000


def stats(created_ms: np.ndarray, latency_ms: np.ndarray, since_ms: float) -> LatencyStats:
    """Percentiles over rows created at or after ``since_ms`` (epoch ms; before: warm-up).

    ``early``/``late`` are the medians of the first and last fifth (by creation time) of the
    measured rows: their growth shows a backlog building up.
    """
    order = np.argsort(created_ms, kind="stable")
    created, latency = created_ms[order], latency_ms[order]
    measured = latency[created >= since_ms]
    if measured.size == 0:
        nan = float("nan")
        return LatencyStats(0, nan, nan, nan, nan, nan, nan)
    fifth = max(1, measured.size // 5)
    p50, p95, p99 = np.percentile(measured, [50, 95, 99])
    return LatencyStats(
        rows=int(measured.size),
        p50_ms=float(p50),
        p95_ms=float(p95),
        p99_ms=float(p99),
        max_ms=float(measured.max()),
        early_p50_ms=float(np.median(measured[:fifth])),
        late_p50_ms=float(np.median(measured[-fifth:])),
    )


PHASES = ("latestOffset", "queryPlanning", "getBatch", "addBatch", "walCommit", "commitOffsets")
"""The parts of a micro-batch Spark times (``durationMs``): finding new offsets, planning, the
source's batch, running it and writing the sink (the Delta commit), the offset log, the commit
log."""


def batch_breakdown(progresses: list[dict], since_ms: float) -> dict[str, float]:
    """Mean milliseconds per phase of the batches that started at or after ``since_ms`` (epoch
    ms), with ``batches`` and ``triggerExecution`` (the whole batch) — where a batch's time goes.
    """
    from datetime import datetime

    def started_ms(p: dict) -> float:
        return datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() * 1000

    timed = [p["durationMs"] for p in progresses
             if p.get("numInputRows") and started_ms(p) >= since_ms]  # fmt: skip
    breakdown: dict[str, float] = {"batches": float(len(timed))}
    for phase in ("triggerExecution", *PHASES):
        values = [d.get(phase, 0) for d in timed]
        breakdown[phase] = float(np.mean(values)) if values else float("nan")
    return breakdown
