"""Output modes: picked where one answer is right, refused where none works with Delta.

A Delta target takes ``append`` (each row once, exactly-once via the txn id), ``complete``
(the whole result rewritten each batch) or, for a table declared with ``keys``, ``update``: each
batch's changed rows are MERGEd on the keys (with the txn id, so a replay is a no-op). So:

- a table with ``keys`` → update (an aggregation emits its changed groups each batch, which the
  MERGE upserts; without an aggregation every row is upserted);

- no aggregation → append;
- aggregation with an event-time watermark → append (a window is written once, when the
  watermark closes it);
- aggregation without a watermark → complete (the only correct choice; state and rewrite cost
  grow with the number of groups, so lakefeed warns);
- an explicit ``append`` on an aggregation without a watermark, ``update``, or ``complete``
  without an aggregation are refused with the fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlanFacts:
    """What the runtime learned from a flow's DataFrame plan (no query started)."""

    streaming: bool
    aggregate: bool = False
    watermark: bool = False
    stateful: list[str] = field(default_factory=list)
    unbounded_dedup: bool = False
    stream_join: bool = False  # a join of two streams: its outer rows wait for the watermark
    # a join of a stream with a batch (static) side, which every micro-batch reads as it is then
    static_join: bool = False
    # a transformWithState in processing-time mode: Spark runs a batch on every trigger for it
    processing_time_timers: bool = False
    # Spark's state encoding the flow's state should start in (None: Spark's setting); "avro"
    # when its only stateful operator is lakefeed's TTL dedup (lakefeed.runtime.query_start)
    state_encoding: str | None = None
    sources: int = 0  # streaming relations read; Spark resumes a checkpoint only with as many


@dataclass(frozen=True)
class ModeChoice:
    mode: str | None  # None when the flow cannot run
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def choose_output_mode(
    name: str, kind: str, facts: PlanFacts, requested: str | None, keys: Sequence[str] = ()
) -> ModeChoice:
    if kind == "materialized_view":
        if facts.streaming:
            return ModeChoice(
                None,
                [
                    f"materialized view {name!r} returned a streaming DataFrame: read its inputs "
                    "with lf.read(...), or declare it @lf.table"
                ],
            )
        return ModeChoice("overwrite")
    if not facts.streaming:
        return ModeChoice(
            None,
            [
                f"streaming table {name!r} returned a batch DataFrame: read inputs with "
                "lf.read_stream(...)/lf.source(...), or declare it @lf.materialized_view"
            ],
        )
    warnings = []
    if facts.unbounded_dedup:
        warnings.append(
            f"{name!r}: dropDuplicates without a watermark keeps every key in state forever; "
            "use withWatermark(...).dropDuplicatesWithinWatermark([...])"
        )
    if keys:
        if requested not in (None, "update"):
            return ModeChoice(
                None, [f"{name!r}: a table with keys is upserted in update mode, not {requested}"]
            )
        return ModeChoice("update", [], warnings)
    if requested == "update":
        return ModeChoice(
            None,
            [
                f"{name!r}: output_mode='update' cannot write a Delta table without the keys "
                "to upsert on: declare @lf.table(keys=[...]); or use a watermark and append "
                "(windows written once closed), or output_mode='complete'"
            ],
        )
    if not facts.aggregate:
        if requested == "complete":
            return ModeChoice(
                None,
                [
                    f"{name!r}: output_mode='complete' needs an aggregation; remove it (append "
                    "is used)"
                ],
            )
        return ModeChoice("append", [], warnings)
    if requested == "append" and not facts.watermark:
        return ModeChoice(
            None,
            [
                f"{name!r}: aggregation in append mode needs a watermark: add "
                ".withWatermark('event_time', '2 minutes') before groupBy and group by a "
                "window of that column, or drop output_mode to let lakefeed use complete"
            ],
        )
    if requested == "complete" or not facts.watermark:
        if requested is None:
            warnings.append(
                f"{name!r}: aggregation without a watermark runs in complete mode: all groups "
                "stay in state and the table is rewritten each batch; add a watermark for append"
            )
        return ModeChoice("complete", [], warnings)
    return ModeChoice("append", [], warnings)
