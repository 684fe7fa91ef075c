"""The run's batch writes: materialized views and backfills replace their table; ``once``
flows append once; snapshot flows (AUTO CDC FROM SNAPSHOT) apply each new snapshot once."""

from __future__ import annotations

from pyspark.sql import DataFrame, Observation

from lakefeed.cdc.apply import ApplyChanges
from lakefeed.cdc.snapshot import ApplySnapshots, snapshot_app_id
from lakefeed.cdc.spec import AutoCdc, state_table
from lakefeed.connectors import delta
from lakefeed.core.storage import remove_tree
from lakefeed.delta import table as delta_table
from lakefeed.pipeline.api import Dataset
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime import expect
from lakefeed.runtime.listener import expectation_event
from lakefeed.runtime.pools import flow_pool
from lakefeed.runtime.query_start import flow_conf
from lakefeed.runtime.run.context import ONCE_DONE, RunContext
from lakefeed.runtime.run.prepare import create_if_missing
from lakefeed.runtime.skipped import report_skipped_files


class BatchWrites:
    """Batch work of any mode: each write evaluates the functions afresh, in batch."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def refresh_view(self, dataset: Dataset) -> None:
        """Recompute a materialized view (or backfill a table) in batch, replacing it."""
        run = self.run
        evaluator = run.evaluator("batch")
        frame = evaluator.evaluate(dataset.name)
        if frame is None:
            raise PipelineError([evaluator.errors.get(dataset.name, dataset.name)])
        with flow_pool(run.spark, dataset.name):
            self.write(dataset, frame)
        sources = evaluator.sources.get(dataset.name, [])
        report_skipped_files(run.events, dataset.name, sources, None)

    def write(self, dataset: Dataset, frame: DataFrame, once: str | None = None) -> None:
        """Replace the table with ``frame``; or, for the ``once`` flow so named, append it."""
        run, rules = self.run, dataset.expectations
        observation = Observation("lakefeed_expectations_batch")
        checked = expect.with_flags(frame, rules, dataset.name, observation)
        target = run.table(dataset.name)
        flow = once or dataset.name
        checked.persist()
        try:
            with flow_conf(run.spark, run.pipeline.spark_conf_of(flow), flow):
                rows = expect.kept_rows(checked, rules)
                if (dataset.schema is not None or dataset.cluster_by) and not delta_table.exists(
                    target
                ):  # a declared schema or clustering: the table is made before its rows
                    create_if_missing(run.lakehouse, dataset, rows)
                keep = dataset.schema is not None  # the declared schema stays the table's
                _save(rows, target, dataset.partition_cols, once, keep_schema=keep)
                delta_table.describe(target, dataset.comment, dataset.table_properties)
                if dataset.quarantine:
                    quarantine = run.table(dataset.quarantine)
                    _save(expect.dropped_rows(checked, rules), quarantine, [], once)
        finally:
            checked.unpersist()
        if rules:
            run.events.emit(
                "expectations",
                f"{dataset.name}: expectations checked (batch)",
                flow=dataset.name,
                details=expectation_event(dataset.name, rules, None, observation.get),
            )

    def once_flows(self, dataset: Dataset) -> None:
        """``once`` flows: a batch append each (an AUTO CDC one: its changes applied), recorded
        in its checkpoint folder so the next run skips it; the write is idempotent (its own
        Delta ``txn``) should the record be lost."""
        run = self.run
        for flow in dataset.flows:
            done = run.lakehouse.checkpoint_path(flow.name) / ONCE_DONE
            if not flow.once or done.exists():
                continue
            evaluator = run.evaluator("batch")
            frame = evaluator.evaluate_flow(flow)
            if frame is None:
                raise PipelineError([evaluator.errors.get(flow.name, f"{flow.name!r} failed")])
            if flow.cdc is None:
                self.write(dataset, frame, once=flow.name)
            else:
                self._apply_once(dataset, flow.cdc, flow.name, frame)
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(run.events.run_id)
            done_what = "applied" if flow.cdc is not None else "appended"
            run.events.emit(
                "flow_stop",
                f"{flow.name} {done_what} once to {dataset.name}",
                flow=flow.name,
                details={"target": dataset.name, "reason": "once"},
            )

    def _apply_once(self, dataset: Dataset, cdc: AutoCdc, flow: str, frame: DataFrame) -> None:
        """A ``once`` AUTO CDC flow's whole source applied as one batch, under its own app id
        (``lakefeed-once-<flow>``, batch 0): a rerun after a crash finds it done."""
        run = self.run
        assert dataset.cdc_state is not None  # a table with AUTO CDC flows keeps their state
        target, side = run.table(dataset.name), run.table(dataset.cdc_state)
        rows = expect.checked_rows(frame, dataset.expectations, dataset.name)
        apply = ApplyChanges(cdc, target, side, None, f"lakefeed-once-{flow}")
        conf = run.pipeline.spark_conf_of(flow)
        with flow_conf(run.spark, conf, flow), flow_pool(run.spark, flow):
            apply(rows, 0)

    def snapshot_flows(self, dataset: Dataset) -> None:
        """AUTO CDC FROM SNAPSHOT flows: each new snapshot applied once (the function called
        as the flow's own code, so ``lf.read`` resolves; see :mod:`lakefeed.cdc.snapshot`)."""
        run = self.run
        target = run.table(dataset.name)
        side = run.table(state_table(dataset.name))
        for flow in dataset.flows:
            if flow.snapshots is None or flow.cdc is None:
                continue
            evaluator = run.evaluator("batch")
            apply = ApplySnapshots(
                flow.cdc, flow.snapshots, target, side, snapshot_app_id(flow.name)
            )
            with evaluator.inside(flow.name), flow_pool(run.spark, flow.name):
                applied = apply()
            if applied:
                run.events.emit(
                    "flow_stop",
                    f"{flow.name}: snapshot(s) {', '.join(map(str, applied))} applied to "
                    f"{dataset.name}",
                    flow=flow.name,
                    details={"target": dataset.name, "reason": "snapshot", "versions": applied},
                )

    def backfill_cdc(self, dataset: Dataset) -> None:
        """An AUTO CDC target rebuilt from all of its sources' changes, each flow's as one
        batch into emptied tables (its own txn app id, so a rerun after a crash is a no-op)."""
        assert dataset.cdc_state is not None
        run = self.run
        target, side = run.table(dataset.name), run.table(dataset.cdc_state)
        for path in (target, side):
            remove_tree(path)
        evaluator = run.evaluator("batch")
        shaped = evaluator.evaluate(dataset.name)
        if shaped is None:
            raise PipelineError(list(evaluator.errors.values()) or [dataset.name])
        create_if_missing(run.lakehouse, dataset, shaped)
        self.snapshot_flows(dataset)  # tables emptied: every snapshot again, from None
        for flow in dataset.flows:
            if flow.snapshots is not None:
                continue
            frame = evaluator.evaluate_flow(flow)
            if frame is None or flow.cdc is None:
                raise PipelineError(list(evaluator.errors.values()) or [flow.name])
            apply = ApplyChanges(flow.cdc, target, side, None, f"backfill-{flow.name}")
            with flow_pool(run.spark, flow.name):
                apply(frame, 0)


def _save(
    frame: DataFrame,
    path: str,
    partition_cols: list[str],
    once: str | None,
    keep_schema: bool = False,
) -> None:
    """Overwrite, or append as once-flow ``once`` (idempotent: one Delta txn per flow); the
    query's schema becomes the table's unless ``keep_schema`` (a declared schema)."""
    evolve = str(not keep_schema).lower()
    if once is None:
        delta.write(
            frame, path, mode="overwrite", partition_by=partition_cols, overwriteSchema=evolve
        )
    else:
        delta.write(
            frame,
            path,
            mode="append",
            partition_by=partition_cols,
            mergeSchema=evolve,
            txnAppId=f"lakefeed-once-{once}",
            txnVersion="0",
        )
