"""A flow's checkpoint guard: a checkpoint is started only if it is this flow's, sound, and
would not write again rows its table already holds.

Shared by the preparation (every flow, before any starts) and by ``lakefeed plan``
(:mod:`lakefeed.runtime.upgrade`), which must predict the same refusals.
"""

from __future__ import annotations

from lakefeed.core.errors import CheckpointError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.logs import get_logger
from lakefeed.core.storage import AnyPath, as_path
from lakefeed.delta import table as delta_table
from lakefeed.pipeline import guard
from lakefeed.pipeline.api import Dataset, Pipeline
from lakefeed.runtime.run.context import ONCE_DONE, RunContext
from lakefeed.runtime.validate import FlowPlan
from lakefeed.spark.checkpoint_files import check_checkpoint_files, clear_interrupted_start

log = get_logger(__name__)


def orphaned_rows(pipeline: Pipeline, lakehouse: Lakehouse, dataset: Dataset, flow: str) -> bool:
    """Rows in the target that a missing checkpoint of ``flow`` would duplicate. A new
    append flow into a table its other flows fill starts from its source's start by design;
    one that has written the table before (or a table no flow has progress for) has not. A
    sink may hold rows of other writers: only a flow that has written it counts."""
    table = written_table(lakehouse, dataset)
    if table is None or not delta_table.has_rows(str(table)):
        return False
    if dataset.sink is not None:
        return flow in guard.flows_started(table)
    if not dataset.declared:
        return True
    siblings = [lakehouse.checkpoint_path(f) for f in pipeline.flow_names(dataset)]
    started = any(guard.has_progress(c) or (c / ONCE_DONE).exists() for c in siblings)
    return flow in guard.flows_started(table) or not started


def written_table(lakehouse: Lakehouse, dataset: Dataset) -> AnyPath | None:
    """The Delta table ``dataset``'s flows fill: its own, or a sink's when the guard can look
    into it (a Delta sink); None for other sinks."""
    if dataset.sink is None:
        return lakehouse.table_path(dataset.name)
    root = dataset.sink.delta_root(lakehouse)
    return as_path(root) if root is not None else None


def guard_flow(
    run: RunContext, dataset: Dataset, plan: FlowPlan, flow: str | None = None
) -> list[str]:
    """The guard's problems with ``flow``'s checkpoint (none: it may start); a flow that
    passes is recorded as this checkpoint's owner and, in a shared table, as its writer."""
    flow = flow or dataset.name
    checkpoint = run.lakehouse.checkpoint_path(flow)
    identity = guard.Identity(run.pipeline.name, flow, dataset.name, plan.facts.stateful)
    refresh = f"lakefeed run PIPELINE --full-refresh {dataset.name}"
    for leftover in clear_interrupted_start(checkpoint):
        log.warning(
            "removed the leftover of an interrupted first batch",
            extra={"flow": flow, "file": str(leftover)},
        )
    try:
        check_checkpoint_files(checkpoint, flow, refresh)
        orphaned = orphaned_rows(run.pipeline, run.lakehouse, dataset, flow)
        guard.check(checkpoint, identity, orphaned, sink=dataset.sink is not None)
    except (guard.GuardError, CheckpointError) as error:
        return [str(error)]
    guard.write_identity(checkpoint, identity)
    written = written_table(run.lakehouse, dataset)
    if written is not None and (dataset.declared or dataset.sink is not None):
        guard.record_flow(written, flow)
    return []
