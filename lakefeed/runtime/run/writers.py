"""The sink builder: what a flow's streaming query writes into.

One of four, chosen per flow: a pipeline sink (its connector's writer,
:mod:`lakefeed.runtime.sinks`); Delta's own stream sink when rows go to the table as they are;
else a ``foreachBatch`` body: the AUTO CDC fold, the quarantine split or the keyed upsert,
wrapped by the late-rows writer when the table keeps late rows (:meth:`SinkBuilder.late_rows`).
Chosen here, so the starter knows no body by name.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from lakefeed.cdc.apply import ApplyChanges
from lakefeed.cdc.spec import state_table
from lakefeed.connectors import delta
from lakefeed.pipeline.api import Dataset
from lakefeed.runtime import expect
from lakefeed.runtime.late import LateRowsWriter
from lakefeed.runtime.run.context import FlowState, RunContext
from lakefeed.runtime.sinks import SinkQuery
from lakefeed.runtime.upsert import KeyedUpsert
from lakefeed.spark.foreach_batch import stop_aware

BatchBody = Callable[[DataFrame, int], None]


class SinkBuilder:
    """Starts the write side of a flow's query on its checked rows (rule flags included)."""

    def __init__(self, run: RunContext) -> None:
        self.run = run

    def start(
        self,
        checked: DataFrame,
        state: FlowState,
        mode: str,
        checkpoint: str,
        target: str,
        trigger: dict,
    ) -> StreamingQuery:
        dataset = state.dataset
        if dataset.sink is not None:
            query = SinkQuery(dataset.name, dataset.sink, state.name, checkpoint, mode, trigger)
            return query.start(checked, self.run.lakehouse)
        rules = dataset.expectations
        writer = self.batch_body(state, mode, checkpoint, target)
        if writer is None:
            return delta.write_stream(
                checked.drop(*expect.flag_columns(rules)),
                target,
                checkpoint,
                output_mode=mode,
                partition_by=dataset.partition_cols,
                query_name=state.name,
                trigger=trigger,
                mergeSchema="true",
            )
        # the quarantine writer splits on the rule flags; every other body gets plain rows
        split = dataset.quarantine and (state.flow is None or state.flow.cdc is None)
        rows = checked if split else checked.drop(*expect.flag_columns(rules))
        return (
            stop_aware(rows.writeStream, writer)
            .queryName(state.name)
            .outputMode(mode)
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start()
        )

    def batch_body(
        self, state: FlowState, mode: str, checkpoint: str, target: str
    ) -> BatchBody | None:
        """The ``foreachBatch`` body of a flow that needs one; None: the Delta stream sink."""
        dataset = state.dataset
        cdc = state.flow.cdc if state.flow is not None else None
        writer: BatchBody | None = None
        table = expect.TableWriter(target, checkpoint, dataset.partition_cols, mode)
        if cdc is not None:
            side = self.run.table(state_table(dataset.name))
            writer = ApplyChanges(cdc, target, side, checkpoint)
        elif dataset.quarantine:
            quarantine = self.run.table(dataset.quarantine)
            writer = expect.QuarantineWriter(table, dataset.expectations, quarantine)
        elif dataset.keys:
            writer = KeyedUpsert(target, dataset.keys, checkpoint)
        if dataset.late_table is None:
            return writer
        return self.late_rows(dataset, writer or table, checkpoint)

    def late_rows(self, dataset: Dataset, writer: BatchBody, checkpoint: str) -> BatchBody:
        """Where ``late_rows='keep'`` is wired: the rows the watermark drops go to the
        dataset's late table, the others to ``writer``."""
        assert dataset.late_table is not None
        late = self.run.table(dataset.late_table)
        return LateRowsWriter(writer, late, checkpoint, dataset.name, self.run.events)
