"""Starting a flow's query: its rows evaluated (or the ones the preparation evaluated), its
expectations flagged, its Spark settings applied for the start, then its sink started."""

from __future__ import annotations

import time

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from lakefeed.connectors import registry
from lakefeed.runtime import expect
from lakefeed.runtime.pools import stream_pool
from lakefeed.runtime.query_start import starting
from lakefeed.runtime.run.context import FlowState, RunContext
from lakefeed.runtime.run.writers import SinkBuilder
from lakefeed.spark import connect
from lakefeed.spark.checkpoint_files import check_checkpoint_files


class FlowStarter:
    """Starts (and restarts) the queries of the run's flows."""

    def __init__(self, run: RunContext, sinks: SinkBuilder) -> None:
        self.run = run
        self.sinks = sinks

    def start(self, state: FlowState, trigger: dict) -> StreamingQuery:
        run, dataset = self.run, state.dataset
        if state.attempts:  # a restart: its files may have been damaged since the first guard
            check_checkpoint_files(
                run.lakehouse.checkpoint_path(state.name),
                state.name,
                f"lakefeed run PIPELINE --full-refresh {dataset.name}",
            )
        checked = expect.with_flags(self._frame(state), dataset.expectations, dataset.name)
        checkpoint = str(run.lakehouse.checkpoint_path(state.name))
        sink = dataset.sink
        target = sink.describe() if sink else run.table(dataset.name)
        mode = state.plan.output_mode or "append"
        conf = run.pipeline.spark_conf_of(state.name)
        with stream_pool(run.spark), starting(run.spark, state.plan.facts, trigger, conf):
            query = connect.start_query(
                lambda: self.sinks.start(checked, state, mode, checkpoint, target, trigger)
            )
        run.events.emit(
            "flow_start",
            f"{state.name} started ({mode}, {trigger})",
            flow=state.name,
            details={
                "checkpoint": checkpoint,
                "target": target,
                "attempt": state.attempts,
                "output_mode": mode,
                "sources": [registry.describe(fmt, opts) for fmt, opts in state.sources],
                **({"sink": dataset.name} if sink else {}),
            },
        )
        state.query = query
        return query

    def _frame(self, state: FlowState) -> DataFrame:
        """The flow's rows: evaluated by the preparation for the first start, afresh for a
        restart (a query's DataFrame is not started twice)."""
        frame, state.frame = state.frame, None
        if frame is None:
            evaluator = self.run.evaluator("stream")
            flow = state.flow
            frame = (
                evaluator.evaluate_flow(flow) if flow else evaluator.evaluate(state.dataset.name)
            )
        if frame is None:
            raise RuntimeError(f"{state.name!r} could not be evaluated")
        return frame


def settle(query: StreamingQuery, timeout: float = 30.0) -> None:
    """Wait until a query has initialised its sources before starting the next one: each start
    spawns Python workers, and starting all at once on a busy machine makes them miss Spark's
    connect-back timeout."""
    deadline = time.monotonic() + timeout
    while query.isActive and time.monotonic() < deadline:
        if query.status.get("message") != "Initializing sources":
            return
        time.sleep(0.2)
