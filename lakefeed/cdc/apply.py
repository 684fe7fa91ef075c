"""The Spark side of AUTO CDC: the target's shape, and the ``foreachBatch`` applying a batch.

Per micro-batch: the changes (``sequence_by`` evaluated, ``apply_as_deletes`` /
``apply_as_truncates`` turned into an op), the target rows and state rows of the keys the batch
touches, grouped by key and folded on the executors (``applyInArrow``, :mod:`lakefeed.cdc.fold`).
The result (changed rows and state rows only) reaches the driver once, as Arrow (never as Python
rows), and is MERGEd by delta-rs into the target, then into its state table, each MERGE carrying
the flow's ``txn`` (query id, batch id). A batch replayed after a crash skips what was committed;
until the state MERGE commits, the state a replay reads is the one before the batch, and the
state rows a fold writes do not depend on the target, so a replay between the two MERGEs writes
the same state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from lakefeed.cdc import fold
from lakefeed.cdc.errors import INVALID
from lakefeed.cdc.spec import END_AT, START_AT, AutoCdc
from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.delta import create, merger
from lakefeed.delta import table as delta_table
from lakefeed.delta.operations import Txn
from lakefeed.spark import offset_log

TRUNCATE = "T"


def expression(value: Any) -> Column:
    """A condition or sequence given as SQL text or as a Column."""
    return F.expr(value) if isinstance(value, str) else value


def cdc_problems(cdc: AutoCdc, changes: DataFrame) -> list[str]:
    """What ``lakefeed validate`` refuses before a query starts: names that are not columns of
    the source, expressions that do not resolve, a sequence that cannot order."""
    problems = cdc.column_problems(changes.columns)
    for what, given in (
        ("sequence_by", cdc.sequence_by),
        ("apply_as_deletes", cdc.apply_as_deletes),
        ("apply_as_truncates", cdc.apply_as_truncates),
    ):
        if given is None:
            continue
        try:
            kind = changes.select(expression(given)).schema.fields[0].dataType
        except Exception as error:  # Spark's analysis error, first line
            first = str(error).strip().split("\n")[0][:300]
            problems.append(f"{what} {given} does not resolve against {changes.columns}: {first}")
            continue
        if what == "sequence_by" and not isinstance(kind, T.AtomicType):
            problems.append(
                f"sequence_by {given} is a {kind.simpleString()}: use one orderable column "
                "(a number, timestamp, date or string)"
            )
        elif what != "sequence_by" and not isinstance(kind, T.BooleanType):
            problems.append(f"{what} {given} is a {kind.simpleString()}, not a condition")
    return problems


def sequence_type(cdc: AutoCdc, changes: DataFrame) -> T.DataType:
    return changes.select(expression(cdc.sequence_by)).schema.fields[0].dataType


def target_schema(cdc: AutoCdc, changes: DataFrame) -> T.StructType:
    """The target's columns: the chosen source columns, plus the SCD2 validity interval."""
    fields = {f.name: f for f in changes.schema.fields}
    schema = T.StructType([fields[c] for c in cdc.columns(changes.columns)])
    if cdc.scd_type == 2:
        seq = sequence_type(cdc, changes)
        schema = schema.add(START_AT, seq).add(END_AT, seq)
    return schema


def target_frame(cdc: AutoCdc, changes: DataFrame, flow: str = "") -> DataFrame:
    """A frame shaped like the target (its rows are meaningless): what readers of the target
    see when the pipeline is validated, and what the target is created with. A flow that
    cannot apply its source is refused here, before any query (see :func:`cdc_problems`)."""
    problems = cdc_problems(cdc, changes)
    if problems:
        raise PipelineDefinitionError(
            f"AUTO CDC flow {flow!r} from {cdc.source!r}: " + "; ".join(problems), code=INVALID
        )
    columns = [F.col(f"`{c}`") for c in cdc.columns(changes.columns)]
    if cdc.scd_type == 2:
        seq = sequence_type(cdc, changes)
        columns += [F.lit(None).cast(seq).alias(START_AT), F.lit(None).cast(seq).alias(END_AT)]
    return changes.select(*columns)


def _ops(cdc: AutoCdc) -> Column:
    op = F.lit(fold.UPSERT)
    if cdc.apply_as_deletes is not None:
        op = F.when(F.coalesce(expression(cdc.apply_as_deletes), F.lit(False)), fold.DELETE)
        op = op.otherwise(F.lit(fold.UPSERT))
    if cdc.apply_as_truncates is not None:
        truncate = F.coalesce(expression(cdc.apply_as_truncates), F.lit(False))
        op = F.when(truncate, TRUNCATE).otherwise(op)
    return op


@dataclass
class ApplyChanges:
    """``foreachBatch`` body of an AUTO CDC flow into ``target`` (paths of Delta tables)."""

    cdc: AutoCdc
    target: str
    state: str
    checkpoint: str | None  # the query's; None for a backfill, which names its ``app_id``
    app_id: str | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        spark = batch.sparkSession
        app_id = self.app_id or offset_log.running_query_id(str(self.checkpoint))
        offsets = offset_log.fingerprint(self.checkpoint, batch_id) if self.checkpoint else None
        txn = Txn(app_id, batch_id, offsets)
        self._create_state(batch)
        if txn.done_at(self.target) and txn.done_at(self.state):
            return  # a replay of a committed batch
        layout = target_schema(self.cdc, batch)
        folded = self._fold(spark, batch, layout).toArrow()  # the changed rows only
        is_state = pc.equal(folded.column(fold.ACTION), fold.STATE)
        rows = folded.filter(pc.invert(is_state)).select([*layout.fieldNames(), fold.ACTION])
        states = folded.filter(is_state).select([*self.cdc.keys, *_STATE])
        self._merge_target(rows, layout.fieldNames(), txn)
        self._merge_state(states, txn)

    # ------------------------------------------------------------------ folding

    def _fold(self, spark: SparkSession, batch: DataFrame, layout: T.StructType) -> DataFrame:
        """Each touched key's new rows and state, folded on the executors."""
        columns, seq = self.cdc.columns(batch.columns), sequence_type(self.cdc, batch)
        keys = self.cdc.keys
        changes = batch.select(
            *[F.col(f"`{c}`") for c in columns],
            _ops(self.cdc).alias(fold.OP),
            expression(self.cdc.sequence_by).alias(fold.SEQ),
        ).where(F.col(fold.SEQ).isNotNull())
        truncate_at = self._truncate_at(changes)
        if truncate_at is not None:
            changes = changes.where(F.col(fold.OP) != TRUNCATE)
        target = read_table(spark, self.target)
        state = read_table(spark, self.state)
        version = {fold.SEQ: F.col(START_AT)} if self.cdc.scd_type == 2 else {}
        known = _in_layout(target, layout, seq, {fold.OP: F.lit(fold.ROW), **version})
        known = known.unionByName(
            _in_layout(state, layout, seq, {c: F.col(c) for c in _STATE}, fold.STATE)
        )
        if truncate_at is None:  # only the keys the batch touches
            known = join_on_keys(known, changes.select(*keys).distinct(), keys, "left_semi")
        given = {c: F.col(c) for c in (fold.OP, fold.SEQ)}
        union = _in_layout(changes, layout, seq, given).unionByName(known)
        rules = fold.Rules(
            keys=tuple(keys),
            columns=tuple(columns),
            scd_type=self.cdc.scd_type,
            ignore_null_updates=self.cdc.ignore_null_updates,
            tracked=tuple(self.cdc.tracked(columns)),
            truncate_at=truncate_at,
        )
        out = _output_schema(layout, seq)
        return union.groupBy(*keys).applyInArrow(_folder(rules, out), out)

    def _truncate_at(self, changes: DataFrame) -> Any:
        """The newest truncate's sequence in the batch (one value to the driver), or None."""
        if self.cdc.apply_as_truncates is None:
            return None
        row = changes.where(F.col(fold.OP) == TRUNCATE).agg(F.max(fold.SEQ)).first()
        return row[0] if row is not None else None

    # ------------------------------------------------------------------ state table

    def _create_state(self, batch: DataFrame) -> None:
        """The state table, created empty before the first batch (keys, sequence, deletes)."""
        if delta_table.exists(self.state):
            return
        create.create(self.state, create.nullable(state_schema(self.cdc, batch)))

    # ------------------------------------------------------------------ merges

    def _merge_target(self, rows: pa.Table, columns: list[str], txn: Txn) -> None:
        on = [*self.cdc.keys, *([START_AT] if self.cdc.scd_type == 2 else [])]
        values = {f"`{c}`": f"source.`{c}`" for c in columns}
        clauses = [
            merger.Clause(merger.MATCHED_DELETE, f"source.`{fold.ACTION}` = '{fold.DELETE}'"),
            merger.Clause(merger.MATCHED_UPDATE, values=values),
            merger.Clause(merger.INSERT, f"source.`{fold.ACTION}` = '{fold.UPSERT}'", values),
        ]
        merger.merge(self.target, rows, _matching(on), clauses, txn=txn)

    def _merge_state(self, states: pa.Table, txn: Txn) -> None:
        clauses = [merger.Clause(merger.MATCHED_UPDATE_ALL), merger.Clause(merger.INSERT_ALL)]
        merger.merge(self.state, states, _matching(self.cdc.keys), clauses, txn=txn)


def read_table(spark: SparkSession, path: str) -> DataFrame:
    """The rows of the Delta table at ``path`` (lakefeed's ``delta`` source)."""
    return spark.read.format("delta").load(path)


def join_on_keys(left: DataFrame, right: DataFrame, keys: list[str], how: str) -> DataFrame:
    """``left`` joined to ``right`` on ``keys`` compared as the MERGEs compare them (``<=>``):
    a NULL key is a key like any other, as in DLT, so its changes meet its rows and state
    (``=`` would never match it, and a later delete of it would find nothing to delete)."""
    on = [F.col(f"l.`{k}`").eqNullSafe(F.col(f"r.`{k}`")) for k in keys]
    return left.alias("l").join(right.alias("r"), on, how)


def _matching(columns: list[str]) -> str:
    return " AND ".join(f"target.`{c}` <=> source.`{c}`" for c in columns)


_STATE = (fold.SEQ, fold.DELETED, fold.DELETES)


def state_schema(cdc: AutoCdc, changes: DataFrame) -> T.StructType:
    seq = sequence_type(cdc, changes)
    keys = [changes.schema[k] for k in cdc.keys]
    return T.StructType(
        [
            *keys,
            T.StructField(fold.SEQ, seq),
            T.StructField(fold.DELETED, T.BooleanType()),
            T.StructField(fold.DELETES, T.ArrayType(seq)),
        ]
    )


def _in_layout(
    frame: DataFrame,
    layout: T.StructType,
    seq: T.DataType,
    given: dict[str, Column],
    op: str | None = None,
) -> DataFrame:
    """``frame`` as the fold's input rows: the target's columns (null where ``frame`` has none)
    and the fold's own (``__op``, ``__seq``, ...), those not ``given`` null."""
    types = {
        fold.OP: T.StringType(),
        fold.SEQ: seq,
        fold.END: seq,
        fold.DELETED: T.BooleanType(),
        fold.DELETES: T.ArrayType(seq),
    }
    given = {fold.OP: F.lit(op), **given} if op is not None else given
    return frame.select(
        *[
            F.col(f"`{f.name}`")
            if f.name in frame.columns
            else F.lit(None).cast(f.dataType).alias(f.name)
            for f in layout
        ],
        *[given.get(name, F.lit(None)).cast(kind).alias(name) for name, kind in types.items()],
    )


def _output_schema(target: T.StructType, seq: T.DataType) -> T.StructType:
    return T.StructType(
        [
            *target.fields,
            T.StructField(fold.ACTION, T.StringType()),
            T.StructField(fold.SEQ, seq),
            T.StructField(fold.DELETED, T.BooleanType()),
            T.StructField(fold.DELETES, T.ArrayType(seq)),
        ]
    )


def _folder(rules: fold.Rules, schema: T.StructType) -> Any:
    """The ``applyInArrow`` function: Arrow in, :func:`fold.fold` on plain rows, Arrow out."""

    arrow = to_arrow_schema(schema, timezone="UTC")

    def apply(table: pa.Table) -> pa.Table:
        rows = fold.fold(table.to_pylist(), rules)
        return pa.Table.from_pylist(rows, schema=arrow)

    return apply
