"""The event log: a Delta table in the lakehouse that records what a pipeline did.

It is the contract between the runtime (which writes) and everything that shows a pipeline
(``lakefeed events``/``status``, the web UI, ``/metrics``), so a stopped pipeline or one running
in another process can be inspected. Writes go through delta-rs directly (no Spark job), batched
by a background thread so that a busy pipeline makes one commit per ``flush_interval``, not one
per event.

Event types and their ``details`` (a JSON object):

- ``run_start``: ``{"mode", "spark": {"api", "master" | "server", "delta_reader"}, "graph":
  {"nodes": [{"name", "kind", ...}], "edges": [[src, dst]]}}`` (``spark``: where the queries ran
  and which Delta source read, :func:`lakefeed.spark.connect.session_facts`)
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
- ``late_rows``: ``{"batch_id", "kept", "table"}``: a ``late_rows="keep"`` flow wrote the rows
  too late for its watermark to ``table`` (rows a flow drops are in its ``flow_progress``,
  ``stateOperators[].numRowsDroppedByWatermark``)
- ``sink_batch``: ``{"batch_id", "sink", "rows"}``: a flow handed ``rows`` rows of a batch to
  sink ``sink`` (``lf.create_sink`` / ``lf.foreach_batch_sink``; a replayed batch the sink
  recognises writes none of them again)
- ``error``: ``{"error", "traceback"}``

The event log is for observing only: a log that cannot be written (a damaged ``_delta_log``, a
full disk) is reported once, as :class:`~lakefeed.core.errors.EventLogError` with the command that
repairs it, and the run goes on with its outcome unchanged. Readers take what they can read
(:func:`open_log` falls back to the newest version that loads, :func:`read_fragments` skips data
files that are gone or damaged) and say what is wrong; :func:`repair_log` rewrites the readable
events into a fresh log, :func:`reset_log` starts an empty one; both move the old log aside.

A run appends one small commit per ``flush_interval``, so a log left alone grows by thousands of
files and commits an hour. :class:`Retention` (pipeline configuration
``lakefeed.eventLog.retention``, e.g. ``"7 days"``, and/or ``lakefeed.eventLog.maxEvents``)
bounds it: at the first flush and then every ``maintenance_interval`` (without a retention:
only the latter) the writer deletes older events, compacts the log's
small files into one, removes files replaced more than :data:`VACUUM_HOURS` ago and writes a
checkpoint so old commit files can be cleaned. Maintenance runs between flushes (one writer, so
nothing conflicts) and, like every write here, never fails a run: a log it cannot open or change
is left as it is until the next pass.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
from deltalake import DeltaTable, write_deltalake

from lakefeed.core.config import EVENT_LOG_MAX_EVENTS, EVENT_LOG_RETENTION
from lakefeed.core.errors import ConfigError, EventLogError
from lakefeed.core.logs import get_logger
from lakefeed.core.options import parse_duration
from lakefeed.core.redact import redact, redact_text
from lakefeed.core.storage import AnyPath, Location, as_path, delta_options
from lakefeed.delta.log import rs_table

log = get_logger(__name__)

# How many versions back a reader looks for one that loads when the newest commit is damaged.
FALLBACK_VERSIONS = 100
_COMMIT = re.compile(r"^(\d{20})\.json$")

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

RETENTION_KEY = EVENT_LOG_RETENTION.key
MAX_EVENTS_KEY = EVENT_LOG_MAX_EVENTS.key
# Replaced data files older than this are deleted: readers of older versions (``lakefeed events
# --follow``, the UI) reload when a file is gone, and an hour is far longer than any of their
# reads.
VACUUM_HOURS = 1
# Old commit files of the log are cleaned up after this (Delta's own log retention property).
LOG_RETENTION = "interval 1 days"


@dataclass(frozen=True)
class Retention:
    """How much of the event log is kept: events younger than ``max_age_s`` seconds and/or the
    newest ``max_events`` (None: no limit)."""

    max_age_s: float | None = None
    max_events: int | None = None

    @property
    def bounded(self) -> bool:
        return self.max_age_s is not None or self.max_events is not None

    @classmethod
    def from_config(cls, get: Callable[[str], str | None]) -> Retention:
        """From the pipeline configuration (``--conf lakefeed.eventLog.retention="7 days"``)."""
        age, cap = get(RETENTION_KEY), get(MAX_EVENTS_KEY)
        seconds = parse_duration(str(age)) if age is not None else None
        if age is not None and not seconds:
            raise ConfigError(
                f"{RETENTION_KEY}={age!r} is not a duration",
                fix=f'give it as Spark writes durations, e.g. --conf {RETENTION_KEY}="7 days"',
            )
        events = int(cap) if cap is not None and str(cap).strip().isdigit() else None
        if cap is not None and not events:
            raise ConfigError(
                f"{MAX_EVENTS_KEY}={cap!r} is not a positive number of events",
                fix=f"e.g. --conf {MAX_EVENTS_KEY}=1000000",
            )
        return cls(seconds, events)


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
        "late_rows",
        "sink_batch",
        "state_memory",
        "error",
    }
)


class EventLog:
    """Thread-safe, buffered appender for one pipeline run."""

    def __init__(
        self,
        path: Location,
        pipeline: str,
        run_id: str | None = None,
        flush_interval: float = 1.0,
        retention: Retention | None = None,
        maintenance_interval: float = 600.0,
    ) -> None:
        self.path = as_path(path)
        self.pipeline = pipeline
        self.run_id = run_id or uuid.uuid4().hex
        self._flush_interval = flush_interval
        self.retention = retention or Retention()
        self._maintenance_interval = maintenance_interval
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: EventLogError | None = None
        self.dropped = 0

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
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                write_deltalake(
                    str(self.path),
                    pa.Table.from_pylist(rows, schema=EVENT_SCHEMA),
                    mode="append",
                    storage_options=delta_options(str(self.path)),
                )
            except Exception as e:  # any failure of the log must spare the run
                self._failed(e, len(rows))

    def _failed(self, error: Exception, rows: int) -> None:
        """Drop the rows; say so once (later writes are still tried: the log may come back)."""
        self.dropped += rows
        if self.error is not None:
            return
        self.error = EventLogError(
            f"the event log at {self.path} cannot be written ({first_line(error)}); the run goes "
            "on, its events are not recorded",
            fix=repair_hint(self.path),
        )
        log.warning("%s", self.error)
        print(f"lakefeed: warning: {self.error}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush()

    def _run(self) -> None:
        # With a retention, a first pass right away: short triggered runs prune the log too.
        due = time.monotonic() + (0 if self.retention.bounded else self._maintenance_interval)
        while not self._stop.wait(self._flush_interval):
            self.flush()
            if time.monotonic() >= due:
                self.maintain()
                due = time.monotonic() + self._maintenance_interval

    def maintain(self) -> None:
        """Apply the retention, compact, vacuum and checkpoint the log (see module doc)."""
        with self._write_lock:
            try:
                _maintain(self.path, self.retention)
            except Exception as e:  # maintenance must spare the run, and the log
                log.warning(f"event log maintenance skipped this time: {first_line(e)}")


def _maintain(path: AnyPath, retention: Retention) -> None:
    if not (path / "_delta_log").is_dir():
        return
    table = rs_table(str(path))  # a damaged log raises: it is left for repair
    if retention.bounded and (cutoff := _cutoff(table, retention)) is not None:
        table.delete(f"timestamp < '{cutoff.isoformat()}'")
        table = rs_table(str(path))
    if table.metadata().configuration.get("delta.logRetentionDuration") != LOG_RETENTION:
        table.alter.set_table_properties({"delta.logRetentionDuration": LOG_RETENTION})
    table.optimize.compact()
    table = rs_table(str(path))
    table.vacuum(retention_hours=VACUUM_HOURS, enforce_retention_duration=False, dry_run=False)
    table.create_checkpoint()
    table.cleanup_metadata()


def _cutoff(table: DeltaTable, retention: Retention) -> datetime | None:
    """Events before this time go: the later of the two limits' cutoffs, so both hold."""
    limits = []
    if retention.max_age_s is not None:
        limits.append(datetime.now(UTC) - timedelta(seconds=retention.max_age_s))
    if retention.max_events is not None:
        stamps = table.to_pyarrow_dataset().to_table(columns=["timestamp"])
        if stamps.num_rows > retention.max_events:
            sort = [("timestamp", "descending")]
            newest = pc.select_k_unstable(stamps, retention.max_events, sort_keys=sort)
            limits.append(pc.min(stamps.column("timestamp").take(newest)).as_py())
    return max(limits) if limits else None


def read_events(
    path: Location,
    *,
    since: datetime | None = None,
    event_types: Iterable[str] | None = None,
    flow: str | None = None,
    run_id: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Events oldest first (the newest ``limit`` when given), ``details`` parsed from JSON.

    A damaged log yields what can be read (see :func:`read_log` for what is wrong).
    """
    table = read_log(path).table
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


def first_line(error: BaseException) -> str:
    """An error's first line (delta-rs appends a Rust backtrace to its messages)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def repair_hint(path: Location) -> str:
    """The commands that mend the event log at ``path`` (``<lakehouse>/event_log``)."""
    lakehouse = as_path(path).parent
    return (
        f"lakefeed event-log repair --lakehouse {lakehouse} (keeps what can be read), or "
        f"lakefeed event-log reset --lakehouse {lakehouse} (starts an empty log)"
    )


def _newest_commit(path: AnyPath) -> int | None:
    versions = [
        int(m.group(1))
        for f in (path / "_delta_log").glob("*.json")
        if (m := _COMMIT.match(f.name)) is not None
    ]
    return max(versions, default=None)


def open_log(path: Location) -> tuple[DeltaTable | None, str | None]:
    """The event log at its newest version that loads, and what is wrong when that is not the
    newest (``(None, None)``: there is no log yet; ``(None, problem)``: nothing loads)."""
    path = as_path(path)
    if not (path / "_delta_log").is_dir():
        return None, None
    try:
        return rs_table(str(path)), None
    except Exception as e:  # damaged logs fail in many ways
        error = first_line(e)
    newest = _newest_commit(path)
    if newest is None:
        return None, f"the event log at {path} cannot be read: {error}"
    for version in range(newest - 1, max(-1, newest - 1 - FALLBACK_VERSIONS), -1):
        try:
            table = rs_table(str(path), version)
        except Exception:  # look further back
            continue
        return table, (
            f"the event log's newest commits ({version + 1}..{newest}) cannot be read "
            f"({error}); showing version {version}"
        )
    return None, f"the event log at {path} cannot be read: {error}"


def read_fragments(
    dataset: pds.Dataset, fragments: Iterable[pds.Fragment]
) -> tuple[pa.Table, dict[str, str]]:
    """The rows of the fragments that can be read, and a problem per file that cannot."""
    parts: list[pa.Table] = []
    problems: dict[str, str] = {}
    for fragment in fragments:
        try:
            parts.append(fragment.to_table(schema=dataset.schema).cast(EVENT_SCHEMA))
        except Exception as e:  # a deleted or truncated file
            problems[fragment.path] = (
                f"event log data file {Path(fragment.path).name} cannot be read "
                f"({first_line(e)}); its events are missing"
            )
    table = pa.concat_tables(parts) if parts else EVENT_SCHEMA.empty_table()
    return table, problems


@dataclass(frozen=True)
class LogRead:
    """What could be read of an event log, and what is wrong with the rest."""

    table: pa.Table
    problems: list[str]


def read_log(path: Location) -> LogRead:
    """Every readable event of the log at ``path`` (unsorted), with the problems met."""
    table, problem = open_log(path)
    problems = [problem] if problem else []
    if table is None:
        return LogRead(EVENT_SCHEMA.empty_table(), problems)
    dataset = table.to_pyarrow_dataset()
    rows, unreadable = read_fragments(dataset, dataset.get_fragments())
    return LogRead(rows, problems + list(unreadable.values()))


@dataclass(frozen=True)
class Mended:
    """The outcome of :func:`repair_log` / :func:`reset_log`."""

    kept: int
    moved_to: AnyPath | None
    problems: list[str]


def _set_aside(path: AnyPath) -> AnyPath | None:
    if not path.exists():
        return None
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    path.rename(str(target))
    return target


def repair_log(path: Location) -> Mended:
    """Rewrite the readable events into a fresh log; the old one is moved aside, not deleted.

    Run it while no pipeline writes to this lakehouse (a running one would keep failing to write
    to the old log's place until its next commit creates the new one).
    """
    path = as_path(path)
    readable = read_log(path)
    moved = _set_aside(path)
    write_deltalake(
        str(path),
        readable.table.sort_by("timestamp"),
        mode="append",
        storage_options=delta_options(str(path)),
    )
    return Mended(readable.table.num_rows, moved, readable.problems)


def reset_log(path: Location) -> Mended:
    """Start an empty event log; the old one is moved aside, not deleted."""
    path = as_path(path)
    moved = _set_aside(path)
    write_deltalake(
        str(path),
        EVENT_SCHEMA.empty_table(),
        mode="append",
        storage_options=delta_options(str(path)),
    )
    return Mended(0, moved, [])
