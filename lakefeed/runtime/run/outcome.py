"""What a run returns: the public :class:`~lakefeed.RunResult`, one row per stored dataset
(how its flow ended, the rows this run committed to its table) and why each failed flow
failed; built from the runner's own record, since the event log may be unwritable."""

from __future__ import annotations

from lakefeed.delta import table as delta_table
from lakefeed.pipeline.api import Dataset
from lakefeed.pipeline.kinds import DatasetKind, RunMode
from lakefeed.runtime.results import FlowResult, FlowStatus, RunResult
from lakefeed.runtime.run.context import RunContext
from lakefeed.runtime.validate import Validation

Versions = dict[str, int | None]


def versions_before(run: RunContext) -> Versions:
    """Each table's version before the run (None: reset or new), so the result can count
    the rows this run committed."""
    options, datasets = run.options, run.pipeline.datasets
    reset = set(datasets) if options.full_refresh_all else set(options.full_refresh)
    return {
        name: None if name in reset else delta_table.version(run.lakehouse.table_path(name))
        for name in datasets
    }


def run_result(run: RunContext, validation: Validation, reason: str, before: Versions) -> RunResult:
    """The answer of a run that ended with ``reason`` ("completed" when nothing stopped it)."""
    datasets = [run.pipeline.datasets[n] for n in validation.order]
    return RunResult(
        run_id=run.events.run_id,
        pipeline=run.pipeline.name,
        mode=RunMode(run.options.mode),
        reason=reason,
        flows=tuple(_flow_result(run, d, validation, reason, before) for d in datasets if d.stored),
        warnings=tuple(validation.warnings),
        errors={n: f.error or "failed" for n, f in run.flows.items() if f.failed},
    )


def _flow_result(
    run: RunContext, dataset: Dataset, validation: Validation, reason: str, before: Versions
) -> FlowResult:
    state = run.flows.get(dataset.name)
    plan = validation.flows.get(dataset.name)
    failed = state is not None and state.failed
    if failed:
        status = FlowStatus.FAILED
    elif reason == "completed":
        status = FlowStatus.COMPLETED
    else:
        status = FlowStatus.STOPPED
    path = run.lakehouse.table_path(dataset.name)
    return FlowResult(
        name=dataset.name,
        kind=DatasetKind(dataset.kind),
        status=status,
        output_mode=plan.output_mode if plan is not None else None,
        rows_written=delta_table.rows_added(path, before[dataset.name]),
        error=(state.error or "failed") if failed and state is not None else None,
    )
