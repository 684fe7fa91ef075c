"""The event log: a Delta table in the lakehouse that records what a pipeline did.

It is the contract between the runtime (which writes) and everything that shows a pipeline
(``lakefeed events``/``status``, the web UI, ``/metrics``), so a stopped pipeline or one running
in another process can be inspected. Writes go through delta-rs directly (no Spark job), batched
by a background thread so that a busy pipeline makes one commit per ``flush_interval``, not one
per event.

Event types and their ``details`` (a JSON object):

- ``run_start``: ``{"mode", "graph": {"nodes": [{"name", "kind", ...}], "edges": [[src, dst]]}}``
- ``run_stop``: ``{"reason"}``
- ``flow_start`` / ``flow_stop`` / ``flow_restart``: ``{"checkpoint", "target", "attempt"?}``;
  ``flow_start`` also ``"sources"``: what the flow's external sources are, e.g.
  ``["Kafka topics orders"]`` (``Connector.describe``)
- ``flow_failed``: ``{"error", "traceback"}``
- ``flow_progress``: Spark's ``StreamingQueryProgress`` as JSON, plus ``"lakefeed": {...}``
  extras (e.g. ``"kafka_lag"``)
- ``expectations``: ``{"batch_id", "table", "rules": {name: {"action", "passed", "failed"}},
  "quarantined"}``
- ``file_skipped``: ``{"path", "size", "mtime_ms", "error", "batch_id"}``: a file source skipped
  an unreadable file (``ignoreCorruptFiles``/``ignoreMissingFiles``)
- ``error``: ``{"error", "traceback"}``
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from lakefeed.observe.redact import redact, redact_text

EVENT_SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("pipeline", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("flow", pa.string()),
        pa.field("event_type", pa.string(), nullable=False),
        pa.field("level", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
        pa.field("details", pa.string()),
    ]
)

EVENT_TYPES = frozenset(
    {
        "run_start",
        "run_stop",
        "flow_start",
        "flow_stop",
        "flow_restart",
        "flow_failed",
        "flow_progress",
        "expectations",
        "file_skipped",
        "error",
    }
)


class EventLog:
    """Thread-safe, buffered appender for one pipeline run."""

    def __init__(
        self,
        path: str | Path,
        pipeline: str,
        run_id: str | None = None,
        flush_interval: float = 1.0,
    ) -> None:
        self.path = Path(path)
        self.pipeline = pipeline
        self.run_id = run_id or uuid.uuid4().hex
        self._flush_interval = flush_interval
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> EventLog:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the background flusher (emit works without it; flush() then writes)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="lakefeed-event-log", daemon=True
            )
            self._thread.start()

    def emit(
        self,
        event_type: str,
        message: str,
        *,
        flow: str | None = None,
        level: str = "INFO",
        details: dict[str, Any] | None = None,
    ) -> None:
        if event_type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {event_type!r}; one of {sorted(EVENT_TYPES)}")
        row = {
            "event_id": uuid.uuid4().hex,
            "timestamp": datetime.now(UTC),
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "flow": flow,
            "event_type": event_type,
            "level": level,
            "message": redact_text(message),
            "details": json.dumps(redact(details), default=str) if details is not None else None,
        }
        with self._lock:
            self._rows.append(row)

    def flush(self) -> None:
        with self._lock:
            rows, self._rows = self._rows, []
        if not rows:
            return
        with self._write_lock:
            self.path.mkdir(parents=True, exist_ok=True)
            write_deltalake(
                str(self.path), pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), mode="append"
            )

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self._flush_interval):
            self.flush()


def read_events(
    path: str | Path,
    *,
    since: datetime | None = None,
    event_types: Iterable[str] | None = None,
    flow: str | None = None,
    run_id: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Events oldest first (the newest ``limit`` when given), ``details`` parsed from JSON."""
    if not DeltaTable.is_deltatable(str(path)):
        return []
    table = DeltaTable(str(path)).to_pyarrow_table()
    conditions = []
    if since is not None:
        conditions.append(
            pc.field("timestamp") > pa.scalar(since, EVENT_SCHEMA.field("timestamp").type)
        )
    if event_types is not None:
        conditions.append(pc.field("event_type").isin(list(event_types)))
    if flow is not None:
        conditions.append(pc.field("flow") == flow)
    if run_id is not None:
        conditions.append(pc.field("run_id") == run_id)
    for condition in conditions:
        table = table.filter(condition)
    table = table.sort_by("timestamp")
    if limit is not None:
        table = table.slice(max(0, table.num_rows - limit))
    events = table.to_pylist()
    for event in events:
        event["details"] = json.loads(event["details"]) if event["details"] else {}
    return events
