"""Facts folded from one batch's progress: Spark's ``StreamingQueryProgress`` as the event log
keeps it in a ``flow_progress`` event (see :mod:`lakefeed.runtime.event_log`).

The runtime reads them (``lakefeed verify`` explains a difference by the rows a flow dropped) and
so do the views over a pipeline (:mod:`lakefeed.observe.figures`); they live here, beside the log
they read, so that the runtime need not import the views above it.
"""

from __future__ import annotations

from typing import Any


def dropped_late(progress: dict[str, Any]) -> int:
    """Rows a batch's stateful operators dropped as too late for the watermark (Spark's count;
    the rows themselves are gone)."""
    operators = progress.get("stateOperators") or []
    return sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in operators)
