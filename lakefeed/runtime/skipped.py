"""Unreadable files a ``cloudFiles`` source skipped (``ignoreCorruptFiles``/``ignoreMissingFiles``)
become ``file_skipped`` events of the flow that read them, so a skip is never only a log line.

Executors leave a record per skipped file under the source's schema location; the runtime turns
new records into events after each batch of the flow. Each record is claimed once, so a restart
or a second look never reports a file twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lakefeed.observe.event_log import EventLog


def report_skipped_files(
    events: EventLog,
    flow: str,
    sources: Iterable[tuple[str, Mapping[str, str]]],
    batch_id: int | None,
) -> None:
    """Emit one ``file_skipped`` event per newly skipped file of ``flow``'s file sources."""
    file_sources = [options for fmt, options in sources if fmt.lower() == "cloudfiles"]
    if not file_sources:
        return
    from lakefeed.connectors.files import claim_skipped

    for options in file_sources:
        for record in claim_skipped(options, "event_log"):
            events.emit(
                "file_skipped",
                f"{flow}: skipped unreadable file {record['path']}: {record['error'][:300]}",
                flow=flow,
                level="WARN",
                details={**record, "batch_id": batch_id},
            )
