"""``lakefeed plan``: what a run of changed pipeline code would do to what the lakehouse holds.

DLT users learn that a change needs a full refresh when the deploy fails — or worse, when a
table quietly mixes rows of two versions. lakefeed already refuses unsafe starts (the checkpoint
guard, the version check); this asks the same questions before a deploy and answers per flow:

- **keep**: the flow resumes where its checkpoint left off;
- **compatible change**: it resumes, and the change takes effect from the next batch (a new
  column: earlier rows read as null; a column no longer written: it stays, null from now on);
- **needs a checkpoint reset**: the checkpoint cannot be resumed, but the table is empty, so
  moving the checkpoint away loses nothing;
- **needs a full refresh**: the table and its checkpoint must be rebuilt from the sources (the
  saved state cannot serve the new query, a column changes type, the output mode changes, the
  query reads other sources, the table is behind its checkpoint), and with it every flow that
  has read past what the rebuilt table will hold.

Materialized views are recomputed on every run, and a table no flow writes any more (a renamed
or removed flow) is left as it is: both are reported, neither blocks a run.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession

from lakefeed.connectors.delta import adapters as delta
from lakefeed.core.errors import LakefeedError, code_of
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.storage import AnyPath
from lakefeed.delta import table as delta_table
from lakefeed.delta.log import rs_table
from lakefeed.pipeline import guard
from lakefeed.pipeline.api import Dataset, Pipeline
from lakefeed.runtime.event_log import read_events
from lakefeed.runtime.results import FlowChange, FlowVerdict, UpgradePlan
from lakefeed.runtime.run.checkpoints import orphaned_rows
from lakefeed.runtime.validate import FlowPlan, Validation, validate
from lakefeed.spark import offset_log

# A checkpoint that is not this flow's can simply be moved away when the table holds nothing.
_MOVABLE = {guard.FOREIGN, guard.OTHER_FLOW}


def plan_upgrade(pipeline: Pipeline, lakehouse: Lakehouse, spark: SparkSession) -> UpgradePlan:
    """Each flow's verdict for the code in ``pipeline`` against ``lakehouse``; nothing written."""
    validation = validate(pipeline, lakehouse, spark)
    changes = [
        _change(pipeline, dataset, flow, validation, lakehouse, spark)
        for dataset in pipeline.datasets.values()
        for flow in pipeline.flow_names(dataset)
        if flow in validation.flows
    ]
    changes = _with_readers(pipeline, lakehouse, validation, changes)
    written = {t for d in pipeline.datasets.values() for t in (d.name, *d.side_tables)}
    written |= {f for d in pipeline.datasets.values() for f in pipeline.flow_names(d)}
    orphans = sorted(_stored_names(lakehouse) - written)
    changes += [
        FlowChange(
            name,
            FlowVerdict.ORPHANED,
            (f"no flow of the pipeline writes {name!r} any more (renamed or removed?)",),
            "nothing: its table and checkpoint stay as they are",
        )
        for name in orphans
    ]
    return UpgradePlan(pipeline.name, tuple(changes), tuple(validation.problems))


def _change(
    pipeline: Pipeline,
    dataset: Dataset,
    name: str,
    validation: Validation,
    lakehouse: Lakehouse,
    spark: SparkSession,
) -> FlowChange:
    """The verdict for flow ``name`` (the dataset's own, or one of its append flows)."""
    plan = validation.flows[name]
    if dataset.kind not in ("table", "sink"):  # a sink's flows stream, as a table's do
        return FlowChange(name, FlowVerdict.RECOMPUTE, (), "all of its input, on every run")
    checkpoint = lakehouse.checkpoint_path(name)
    path = lakehouse.table_path(dataset.name)
    rows = delta_table.row_count(path) or 0
    orphaned = orphaned_rows(pipeline, lakehouse, dataset, name)
    if not guard.has_progress(checkpoint) and not orphaned:
        return FlowChange(name, FlowVerdict.NEW, (), "its sources from their starting offsets")
    refusal = _guard_refusal(dataset, name, plan, checkpoint, rows, orphaned)
    if refusal is not None:
        return refusal
    breaking, compatible = _schema_changes(spark, path, plan.columns)
    breaking += _mode_change(lakehouse, name, plan.output_mode)
    breaking += _source_change(checkpoint, plan)
    reads = validation.graph.nodes[dataset.name].reads
    breaking += _tables_no_longer_read(checkpoint, lakehouse, reads)
    if breaking:
        return _refresh(name, breaking, rows)
    last = guard.last_committed_batch(checkpoint)
    resume = f"nothing: resumes after batch {last}" if last is not None else "nothing"
    if compatible:
        return FlowChange(name, FlowVerdict.COMPATIBLE, tuple(compatible), resume)
    return FlowChange(name, FlowVerdict.KEEP, (), resume)


def _guard_refusal(
    dataset: Dataset, flow: str, plan: FlowPlan, checkpoint: AnyPath, rows: int, orphaned: bool
) -> FlowChange | None:
    """The checkpoint guard's own answer, as ``run`` would give it before starting."""
    identity = guard.Identity("", flow, dataset.name, plan.facts.stateful)
    try:
        guard.check(checkpoint, identity, orphaned, sink=dataset.sink is not None)
    except guard.GuardError as error:
        if code_of(error) in _MOVABLE and rows == 0:
            return FlowChange(
                flow,
                FlowVerdict.RESET,
                (str(error),),
                "its sources from their starting offsets (the table is empty)",
            )
        return _refresh(flow, [str(error)], rows)
    return None


def _refresh(name: str, reasons: list[str], rows: int) -> FlowChange:
    return FlowChange(
        name,
        FlowVerdict.REFRESH,
        tuple(reasons),
        f"its {rows} rows dropped and rebuilt from the start of its sources",
    )


def _schema_changes(
    spark: SparkSession, path: AnyPath, columns: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """(breaking, compatible) differences between the new query's columns and the table's."""
    if not delta_table.exists(path):
        return [], []
    stored = {f.name: f.dataType.simpleString() for f in delta.read(spark, str(path)).schema}
    breaking = [
        f"column {c!r} changes type from {stored[c]} to {t}: Delta refuses the new files"
        for c, t in columns.items()
        if c in stored and stored[c] != t
    ]
    compatible = [
        f"adds column {c!r} ({t}): earlier rows read it as null"
        for c, t in columns.items()
        if c not in stored
    ]
    compatible += [
        f"no longer writes column {c!r}: it stays in the table, null in new rows"
        for c in stored
        if c not in columns
    ]
    return breaking, compatible


def _mode_change(lakehouse: Lakehouse, name: str, mode: str | None) -> list[str]:
    """A new output mode cannot continue the table the old one wrote (the event log knows it)."""
    try:
        starts = read_events(lakehouse.event_log_path, event_types=["flow_start"], flow=name)
    except (LakefeedError, OSError):
        return []  # no event log or a damaged one: the mode is not known, not a reason to refuse
    before = next(
        (e["details"].get("output_mode") for e in reversed(starts) if e.get("details")), None
    )
    if before is None or mode is None or before == mode:
        return []
    return [
        f"output mode changes from {before} to {mode}: the table holds what {before} mode "
        f"wrote, which {mode} mode would duplicate or lose"
    ]


def _source_change(checkpoint: AnyPath, plan: FlowPlan) -> list[str]:
    """Spark cannot resume offsets recorded for another number of sources."""
    recorded = offset_log.source_count(checkpoint)
    if recorded is None or recorded == plan.facts.sources:
        return []
    return [
        f"the query now reads {plan.facts.sources} source(s) where its checkpoint recorded "
        f"{recorded}: Spark cannot resume those offsets"
    ]


def _tables_no_longer_read(
    checkpoint: AnyPath, lakehouse: Lakehouse, reads: tuple[str, ...]
) -> list[str]:
    """Offsets recorded for a table the flow no longer reads would be applied to another one."""
    ids = {_table_id(lakehouse.table_path(n)): n for n in lakehouse.table_names()}
    recorded = {ids.get(str(o["reservoirId"])) for o in guard.delta_offsets(checkpoint)}
    gone = sorted(n for n in recorded if n is not None and n not in reads)
    return [
        f"it no longer reads table {n!r}, the table its checkpoint's offsets are for" for n in gone
    ]


def _table_id(path: AnyPath) -> str:

    return str(rs_table(str(path)).metadata().id)


def _with_readers(
    pipeline: Pipeline, lakehouse: Lakehouse, validation: Validation, changes: list[FlowChange]
) -> list[FlowChange]:
    """A table rebuilt under a flow that has read it: that flow must be rebuilt too."""
    refreshed = [c.flow for c in changes if c.verdict is FlowVerdict.REFRESH]
    if not refreshed:
        return changes
    flows, tables = guard.lakehouse_flows(pipeline, lakehouse, validation.sources)
    needed = guard.refresh_closure(flows, tables, refreshed)
    return [
        _refresh(
            c.flow,
            [*c.reasons, f"it has read {', '.join(refreshed)}, which will be rebuilt"],
            delta_table.row_count(lakehouse.table_path(c.flow)) or 0,
        )
        if c.flow in needed and c.verdict is not FlowVerdict.REFRESH
        else c
        for c in changes
    ]


def _stored_names(lakehouse: Lakehouse) -> set[str]:
    """The tables and flow checkpoints the lakehouse holds."""
    checkpoints = lakehouse.root / "checkpoints"
    names = set(lakehouse.table_names())
    if checkpoints.is_dir():
        names |= {p.name for p in checkpoints.iterdir() if p.is_dir()}
    return names
