"""Events a flow's sources report after each of its batches, e.g. a file a ``cloudFiles`` source
skipped (``ignoreCorruptFiles``/``ignoreMissingFiles``), so a skip is never only a log line.

Which sources report what is each connector's business (``Connector.batch_events``); the
runtime only emits what they report, tagged with the flow and batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lakefeed.connectors import registry
from lakefeed.runtime.event_log import EventLog


def report_skipped_files(
    events: EventLog,
    flow: str,
    sources: Iterable[tuple[str, Mapping[str, str]]],
    batch_id: int | None,
) -> None:
    """Emit the events ``flow``'s sources report for a batch (one ``file_skipped`` event per
    newly skipped file of a file source, each reported once)."""
    for event in registry.batch_events(flow, list(sources)):
        events.emit(
            event.kind,
            event.message,
            flow=flow,
            level=event.level,
            details={**event.details, "batch_id": batch_id},
        )
