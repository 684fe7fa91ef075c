"""Expectations on DataFrames: flag columns, per-batch counts, fail, drop and quarantine.

Why this shape: the target must be written by the exactly-once Delta sink, so counting cannot
happen in a side job. Each rule becomes a boolean flag column; ``DataFrame.observe`` turns the
flags into named per-batch metrics that Spark reports in the query progress (the listener writes
them to the event log). A fail rule is a filter whose predicate calls ``raise_error``: the task
fails, so the batch is never committed and the query stops. Drop rules need two outputs (kept
rows to the table, dropped rows with their failed rule names to ``<table>_quarantine``): that
flow writes through ``foreachBatch`` with two Delta writes, each idempotent by
``txnAppId``/``txnVersion`` = (query id, batch id), so a replayed batch commits neither twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from lakefeed.connectors import delta
from lakefeed.delta.replay import OFFSETS
from lakefeed.pipeline.expectations import (
    FAILED_RULES_COLUMN,
    OBSERVATION_NAME,
    TOTAL_COLUMN,
    Action,
    Expectation,
    fail_message,
    metric_column,
)
from lakefeed.spark import offset_log

_FLAG = "__lakefeed_ok_{}"
KEPT = "__lakefeed_kept"


def flag(index: int) -> str:
    return _FLAG.format(index)


def _ok(rule: Expectation) -> Column:
    # NULL fails a rule: a missing value must not pass a range check.
    return F.coalesce(F.expr(rule.predicate), F.lit(False))


def with_flags(
    df: DataFrame, rules: list[Expectation], table: str, observation: Observation | None = None
) -> DataFrame:
    """Add flag columns, observe per-rule counts, enforce fail rules. No-op without rules.

    Streaming queries report the counts in their progress under ``OBSERVATION_NAME``; a batch
    write passes an ``Observation`` to read them after the write.
    """
    if not rules:
        return df
    flagged = df.select("*", *[_ok(rule).alias(flag(i)) for i, rule in enumerate(rules)])
    drop_flags = [F.col(flag(i)) for i, r in enumerate(rules) if r.action is Action.DROP]
    kept = F.lit(True)
    for column in drop_flags:
        kept = kept & column
    flagged = flagged.withColumn(KEPT, kept)
    metrics = [F.count(F.lit(1)).alias(TOTAL_COLUMN)]
    metrics += [
        F.sum(F.when(F.col(flag(i)), 0).otherwise(1)).alias(metric_column(i))
        for i in range(len(rules))
    ]
    metrics.append(F.sum(F.when(F.col(KEPT), 0).otherwise(1)).alias("dropped"))
    observed = flagged.observe(observation or OBSERVATION_NAME, *metrics)
    for i, rule in enumerate(rules):
        if rule.action is Action.FAIL:
            observed = observed.filter(
                F.when(~F.col(flag(i)), F.raise_error(F.lit(fail_message(rule, table)))).otherwise(
                    F.lit(True)
                )
            )
    return observed


def flag_columns(rules: list[Expectation]) -> list[str]:
    return [flag(i) for i in range(len(rules))] + [KEPT] if rules else []


def checked_rows(df: DataFrame, rules: list[Expectation], table: str) -> DataFrame:
    """Every row, fail rules enforced and counts observed, without the flag columns: what an
    AUTO CDC flow applies (its target keeps no quarantine)."""
    return with_flags(df, rules, table).drop(*flag_columns(rules))


def kept_rows(df: DataFrame, rules: list[Expectation]) -> DataFrame:
    if not rules:
        return df
    return df.filter(F.col(KEPT)).drop(*flag_columns(rules))


def dropped_rows(df: DataFrame, rules: list[Expectation]) -> DataFrame:
    """Rows failing a drop rule, with the names of every rule they failed."""
    names = F.array_compact(
        F.array(*[F.when(~F.col(flag(i)), F.lit(r.name)) for i, r in enumerate(rules)])
    )
    return (
        df.filter(~F.col(KEPT))
        .withColumn(FAILED_RULES_COLUMN, names)
        .withColumn("_quarantined_at", F.current_timestamp())
        .drop(*flag_columns(rules))
    )


@dataclass
class TableWriter:
    """``foreachBatch`` body writing the batch to its table alone (wrapped by other writers)."""

    target: str
    checkpoint: str
    partition_cols: list[str]
    output_mode: str

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.write(batch, batch_id, offset_log.running_query_id(self.checkpoint))

    def write(self, df: DataFrame, batch_id: int, app_id: str, side: str | None = None) -> None:
        """Rows of batch ``batch_id`` to the table (or to a ``side`` table, unpartitioned) in
        the flow's output mode: a complete-mode flow replaces what it wrote before."""
        mode = "overwrite" if self.output_mode == "complete" else "append"
        offsets = offset_log.fingerprint(self.checkpoint, batch_id)
        if side is None:
            write_batch(df, self.target, mode, app_id, batch_id, self.partition_cols, offsets)
        else:
            write_batch(df, side, mode, app_id, batch_id, [], offsets)


@dataclass
class QuarantineWriter:
    """``foreachBatch`` body: kept rows to the table, dropped rows to the quarantine table."""

    table: TableWriter
    rules: list[Expectation]
    quarantine: str

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        app_id = offset_log.running_query_id(self.table.checkpoint)
        batch.persist()
        try:
            self.table.write(kept_rows(batch, self.rules), batch_id, app_id)
            dropped = dropped_rows(batch, self.rules)
            self.table.write(dropped, batch_id, app_id, side=self.quarantine)
        finally:
            batch.unpersist()


def write_batch(
    df: DataFrame,
    path: str,
    mode: str,
    app_id: str,
    batch_id: int,
    partition_cols: list[str],
    offsets: str | None = None,
) -> None:
    """One batch to a Delta table, idempotent by (query id, batch id); ``offsets``: the batch's
    source offsets hash, recorded with the commit and compared if the batch is skipped."""

    delta.write(
        df,
        path,
        mode=mode,
        partition_by=partition_cols,
        txnAppId=app_id,
        txnVersion=str(batch_id),
        mergeSchema="true",
        **({OFFSETS: offsets} if offsets else {}),
    )
