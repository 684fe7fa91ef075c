"""Builders of event-log content for the observe tests: Spark-shaped progress and a graph."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

GRAPH = {
    "nodes": [
        {"name": "readings", "kind": "source"},
        {"name": "bronze", "kind": "flow"},
        {"name": "gold", "kind": "flow"},
    ],
    "edges": [["readings", "bronze"], ["bronze", "gold"]],
}


def iso(at: datetime) -> str:
    """Spark's progress timestamp form: ``2026-01-01T00:00:00.000Z``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def progress(
    batch_id: int,
    at: datetime,
    *,
    rows: int = 100,
    input_rps: float = 50.0,
    processed_rps: float = 100.0,
    duration_ms: int = 200,
    newest_event: datetime | None = None,
    watermark: datetime | None = None,
    state_rows: int | None = None,
    dropped: int = 0,
    sources: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``StreamingQueryProgress`` JSON as Spark 4 writes it (the fields lakefeed reads)."""
    data: dict[str, Any] = {
        "id": "7b1c2f9e-0000-4000-8000-000000000001",
        "runId": "7b1c2f9e-0000-4000-8000-000000000002",
        "name": "bronze",
        "timestamp": iso(at),
        "batchId": batch_id,
        "batchDuration": duration_ms,
        "numInputRows": rows,
        "inputRowsPerSecond": input_rps,
        "processedRowsPerSecond": processed_rps,
        "durationMs": {"addBatch": duration_ms - 20, "triggerExecution": duration_ms},
        "stateOperators": [],
        "sources": sources or [{"description": "lakefeed_iot", "numInputRows": rows}],
        "sink": {"description": "lakefeed_delta", "numOutputRows": rows},
    }
    if newest_event is not None:
        data["eventTime"] = {
            "max": iso(newest_event),
            "min": iso(newest_event - timedelta(seconds=5)),
            "avg": iso(newest_event - timedelta(seconds=2)),
            "watermark": iso(watermark or datetime(1970, 1, 1, tzinfo=UTC)),
        }
    if state_rows is not None:
        data["stateOperators"] = [
            {
                "operatorName": "stateStoreSave",
                "numRowsTotal": state_rows,
                "numRowsUpdated": 3,
                "memoryUsedBytes": state_rows * 100,
                "numRowsDroppedByWatermark": dropped,
            }
        ]
    return data
