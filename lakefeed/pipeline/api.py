"""The decorators users write pipelines with, DLT/SDP style.

``@table`` declares a streaming table, ``@materialized_view`` a batch-recomputed table, ``@view``
a named DataFrame that is not stored. ``expect``/``expect_or_drop``/``expect_or_fail`` attach
rules. Inside a flow function, ``read_stream(name)``/``read(name)`` read another dataset of the
pipeline and ``source(kind, **options)`` reads an external source; which DataFrame they return
(streaming, batch, or an inlined plan for validation) is decided by the runtime that evaluates
the function, which is how one flow function serves every run mode.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

from lakefeed.cdc import snapshot
from lakefeed.cdc.errors import FLOWS_MIXED
from lakefeed.cdc.snapshot import SnapshotFunction, Snapshots
from lakefeed.cdc.spec import AutoCdc, state_table
from lakefeed.connectors.registry import source_format
from lakefeed.core.flow_context import _RESOLVER, active_resolver, read_source
from lakefeed.core.lakehouse import check_name
from lakefeed.core.scoped import bound
from lakefeed.pipeline.expectations import Action, Expectation, quarantine_table
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.kinds import DatasetKind, choices
from lakefeed.pipeline.names import Namespace
from lakefeed.pipeline.sinks import FOREACH_BATCH, SINK_FLOW, Sink, problem
from lakefeed.pipeline.table_schema import DeclaredSchema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakefeed.core.storage import AnyPath
    from lakefeed.pipeline.sql import SqlFlow

KINDS = tuple(choices(DatasetKind))
OUTPUT_MODES = ("append", "complete", "update")
LATE_ROWS = ("drop", "keep")
LATE_SUFFIX = "_late"

# A flow function keeps its own type through every decorator (``@lf.table`` returns it as is).
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Dataset:
    """One node of a pipeline: how to compute it and how to store it."""

    name: str
    kind: DatasetKind
    func: Callable[[], DataFrame]
    comment: str | None = None
    partition_cols: list[str] = field(default_factory=list)
    # Liquid clustering columns (lakefeed.delta.clustering): never with partition_cols.
    cluster_by: list[str] = field(default_factory=list)
    table_properties: dict[str, str] = field(default_factory=dict)
    expectations: list[Expectation] = field(default_factory=list)
    output_mode: str | None = None
    source: str = ""
    sql: SqlFlow | None = None
    # Set by create_streaming_table: the table has no query of its own, its append flows fill it.
    declared: bool = False
    # DLT's @dlt.table: a materialized view after all when its query turns out to be batch.
    infer_kind: bool = False
    flows: list[AppendFlow] = field(default_factory=list)
    # Upsert keys: each micro-batch is MERGEd on them (update mode into Delta).
    keys: list[str] = field(default_factory=list)
    # "keep": rows a stateful operator would drop as too late go to ``<name>_late``.
    late_rows: str = "drop"
    sink: Sink | None = None  # a sink's format and options (kind "sink")
    # DLT's spark_conf: Spark SQL settings for this dataset's flows (their queries and batches).
    spark_conf: dict[str, str] = field(default_factory=dict)
    # DLT's/SDP's schema=: the table's columns and constraints, its query's rows conformed to it
    schema: DeclaredSchema | None = None
    # DLT's private=/temporary=: stored, read by the pipeline's flows, not published by name
    private: bool = False
    # DLT's path=: the table's location instead of tables/<name> (see pipeline.table_paths)
    path: str | None = None

    @property
    def stored(self) -> bool:
        return self.kind not in ("view", "sink")

    @property
    def cdc_state(self) -> str | None:
        """The side table of an AUTO CDC target (each key's newest sequence and deletes)."""
        if any(flow.cdc is not None for flow in self.flows):
            return state_table(self.name)
        return None

    @property
    def quarantine(self) -> str | None:
        """The side table for dropped rows, when the dataset has drop rules."""
        if any(rule.action is Action.DROP for rule in self.expectations) and self.stored:
            return quarantine_table(self.name)
        return None

    @property
    def late_table(self) -> str | None:
        """The side table for rows too late for the watermark, when the flow keeps them."""
        return f"{self.name}{LATE_SUFFIX}" if self.late_rows == "keep" else None

    @property
    def side_tables(self) -> list[str]:
        """Tables written by this dataset's flows besides its own (reset and compacted with it)."""
        return [t for t in (self.quarantine, self.late_table, self.cdc_state) if t]


@dataclass
class AppendFlow:
    """One flow into a streaming table declared by ``create_streaming_table`` (DLT/SDP's
    ``append_flow``): its own query and its own checkpoint, ``checkpoints/<name>``.

    ``once`` flows are one-off backfills: run once as a batch append, recorded, and repeated
    only after a full refresh of the target.
    """

    name: str
    target: str
    func: Callable[[], DataFrame]
    once: bool = False
    comment: str | None = None
    source: str = ""
    cdc: AutoCdc | None = None  # an AUTO CDC flow: its changes are applied, not appended
    snapshots: Snapshots | None = None  # AUTO CDC FROM SNAPSHOT: where its snapshots come from
    spark_conf: dict[str, str] = field(default_factory=dict)  # over its target's spark_conf

    @property
    def batch(self) -> bool:
        """Run by the runner as batches of its own, not as a streaming query."""
        return self.once or self.snapshots is not None


class Pipeline:
    """The datasets a set of pipeline files declares, and the append flows feeding them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.datasets: dict[str, Dataset] = {}
        self.append_flows: dict[str, AppendFlow] = {}
        # From a spark-pipeline.yml spec: Spark confs for the run, the default lakehouse, the
        # catalog and database its datasets' names resolve in.
        self.configuration: dict[str, str] = {}
        self.storage: AnyPath | None = None
        self.namespace = Namespace()

    def add_flow(self, flow: AppendFlow) -> AppendFlow:
        check_name(flow.name)
        if flow.name in self.append_flows:
            first = self.append_flows[flow.name].source
            raise PipelineError(
                [
                    f"flow {flow.name!r} is defined twice ({first} and {flow.source}); give "
                    "one of them another name (append_flow(name=...))"
                ]
            )
        self.append_flows[flow.name] = flow
        return flow

    def link_flows(self) -> list[str]:
        """Attach each append flow to its target; what is wrong, phrased with the fix."""
        problems = []
        for dataset in self.datasets.values():
            dataset.flows = []
        for flow in self.append_flows.values():
            target = self.datasets.get(flow.target)
            writes = "applies changes to" if flow.cdc is not None else "appends to"
            if target is None:
                problems.append(
                    f"flow {flow.name!r} ({flow.source}) {writes} {flow.target!r}, which is not "
                    "declared: declare it with lf.create_streaming_table(...) or fix the name"
                )
            elif not target.declared:
                kind = "materialized view" if target.kind == "materialized_view" else "table"
                problems.append(
                    f"flow {flow.name!r} ({flow.source}) {writes} {flow.target!r}, which "
                    f"has its own query ({kind}, {target.source}): declare the target with "
                    "lf.create_streaming_table(...) and make its query a flow too"
                )
            elif flow.name in self.datasets:
                problems.append(
                    f"flow {flow.name!r} ({flow.source}) has the name of a dataset, and flows "
                    "and datasets share checkpoint names: rename it (append_flow(name=...))"
                )
            else:
                target.flows.append(flow)
                problems.extend(_sink_flow_problems(target, flow))
        problems.extend(_mixed_cdc(d) for d in self.datasets.values() if _mixed_cdc(d))
        problems.extend(
            f"{_what(d)} {d.name!r} ({d.source}) has no flow: add one with "
            f"@lf.append_flow(target={d.name!r})"
            for d in self.datasets.values()
            if d.declared and not d.flows
        )
        for dataset in self.datasets.values():
            if dataset.sink is not None:
                problems.extend(dataset.sink.problems(dataset.name))
                problems.extend(_writes_own_table(self, dataset.name, dataset.sink))
        return problems

    def spark_conf_of(self, name: str) -> dict[str, str]:
        """The Spark settings flow or dataset ``name`` runs with: a dataset's ``spark_conf``;
        an append flow's own over its target's (DLT's rule: the flow's setting wins)."""
        flow = self.append_flows.get(name)
        if flow is not None:
            target = self.datasets.get(flow.target)
            return {**(target.spark_conf if target else {}), **flow.spark_conf}
        dataset = self.datasets.get(name)
        return dict(dataset.spark_conf) if dataset is not None else {}

    def flow_names(self, dataset: Dataset) -> list[str]:
        """The checkpoints a stored dataset writes with: its own, or one per append flow."""
        return [f.name for f in dataset.flows] if dataset.declared else [dataset.name]

    def add(self, dataset: Dataset) -> Dataset:
        check_name(dataset.name)
        if dataset.name in self.datasets:
            first = self.datasets[dataset.name].source
            raise PipelineError(
                [
                    f"dataset {dataset.name!r} is defined twice ({first} and {dataset.source}); "
                    "rename one of them"
                ]
            )
        if dataset.kind not in KINDS:
            raise PipelineError(
                [f"{dataset.name!r}: unknown kind {dataset.kind!r}: use one of {', '.join(KINDS)}"]
            )
        dataset.kind = DatasetKind(dataset.kind)
        self.datasets[dataset.name] = dataset
        return dataset


def _what(dataset: Dataset) -> str:
    return "sink" if dataset.kind == "sink" else "streaming table"


def _sink_flow_problems(target: Dataset, flow: AppendFlow) -> list[str]:
    """A sink takes streaming append flows (DLT's rule): no AUTO CDC, no one-off batch."""
    if target.kind != "sink":
        return []
    if flow.cdc is not None:
        return [
            problem(
                f"AUTO CDC flow {flow.name!r} ({flow.source}) targets sink {target.name!r}",
                "apply the changes to a streaming table, and stream that table to the sink "
                "with an append flow",
                SINK_FLOW,
            )
        ]
    if flow.once:
        return [
            problem(
                f"flow {flow.name!r} ({flow.source}) into sink {target.name!r} has once=True: "
                "a one-off batch backfill cannot be replayed safely into a sink",
                "remove once=True: a sink takes streaming flows",
                SINK_FLOW,
            )
        ]
    return []


def _writes_own_table(pipeline: Pipeline, name: str, sink: Sink) -> list[str]:
    """A Delta sink by ``tableName`` must not be a table the pipeline's own flows write."""
    table = sink.table
    if table is None or table.split(".")[-1] not in pipeline.datasets:
        return []
    return [
        problem(
            f"sink {name!r} writes {table!r}, a dataset of this pipeline",
            f"add an @lf.append_flow(target={table!r}) to fill the table, or give the sink "
            "a table outside the pipeline",
            SINK_FLOW,
        )
    ]


def _mixed_cdc(dataset: Dataset) -> str:
    """A table is either appended to or kept by AUTO CDC flows that agree on how (DLT: INSERT
    INTO and AUTO CDC INTO are mutually exclusive)."""
    cdc = [f for f in dataset.flows if f.cdc is not None]
    if not cdc:
        return ""
    if len(cdc) < len(dataset.flows):
        return problem(
            f"streaming table {dataset.name!r} has both AUTO CDC and append flows",
            "give the appended rows their own table, or turn them into changes of the CDC "
            "source; for a one-off backfill of the target use an AUTO CDC flow with once=True "
            "(SQL: AUTO CDC ONCE INTO)",
            FLOWS_MIXED,
        )
    if len(dataset.flows) > 1 and any(f.snapshots is not None for f in dataset.flows):
        return problem(
            f"streaming table {dataset.name!r} has an AUTO CDC FROM SNAPSHOT flow and others",
            "make the snapshot flow the only flow into it (as in DLT): it keeps its target "
            "equal to its snapshots",
            FLOWS_MIXED,
        )
    shapes = {(tuple(f.cdc.keys), f.cdc.scd_type) for f in cdc if f.cdc is not None}
    if len(shapes) > 1:
        return problem(
            f"the AUTO CDC flows into {dataset.name!r} differ in keys or stored_as_scd_type",
            "declare the same keys and SCD type in each",
            FLOWS_MIXED,
        )
    return ""
    if len(cdc) < len(dataset.flows):
        return (
            f"streaming table {dataset.name!r} has both AUTO CDC and append flows: give the "
            "appended rows their own table, or turn them into changes of the CDC source"
        )
    if len(dataset.flows) > 1 and any(f.snapshots is not None for f in dataset.flows):
        return (
            f"streaming table {dataset.name!r} has an AUTO CDC FROM SNAPSHOT flow and others: "
            "a snapshot flow keeps its target equal to its snapshots, so it must be the only "
            "flow into it (as in DLT)"
        )
    shapes = {(tuple(f.cdc.keys), f.cdc.scd_type) for f in cdc if f.cdc is not None}
    if len(shapes) > 1:
        return (
            f"the AUTO CDC flows into {dataset.name!r} differ in keys or stored_as_scd_type: "
            "declare the same keys and SCD type in each"
        )
    return ""


_DEFAULT = Pipeline("default")
_LOADING: ContextVar[Pipeline | None] = ContextVar("lakefeed_loading", default=None)


def default_pipeline() -> Pipeline:
    """Datasets declared outside ``lakefeed run`` (e.g. in a notebook) land here."""
    return _DEFAULT


def current_pipeline() -> Pipeline:
    return _LOADING.get() or _DEFAULT


def loading(pipeline: Pipeline) -> AbstractContextManager[Pipeline]:
    """Decorators evaluated inside this block register into ``pipeline``."""
    return bound(_LOADING, pipeline)


_CONFIG: dict[str, str] = {}


def set_config(values: Mapping[str, str]) -> None:
    """Pipeline configuration (``lakefeed run --conf key=value``), like DLT's ``configuration``."""
    _CONFIG.clear()
    _CONFIG.update(values)


def config_defaults(values: Mapping[str, str]) -> None:
    """Configuration a pipeline spec gives, under what ``--conf`` set."""
    for key, value in values.items():
        _CONFIG.setdefault(key, value)


def config(key: str, default: Any = None) -> Any:
    """A pipeline configuration value, so one pipeline file serves demo, tests and production."""
    return _CONFIG.get(key, default)


def config_keys() -> list[str]:
    """The keys the pipeline configuration holds (to refuse lakefeed settings it does not know)."""
    return list(_CONFIG)


def read_stream(name: str, **options: Any) -> DataFrame:
    """Read dataset ``name`` of this pipeline incrementally (a batch read in backfill mode)."""
    return active_resolver("read_stream").read(name, True, _stringify(options))


def read(name: str, **options: Any) -> DataFrame:
    """Read dataset ``name`` of this pipeline as a complete (batch) DataFrame."""
    return active_resolver("read").read(name, False, _stringify(options))


def source(kind: str, path: str | None = None, **options: Any) -> DataFrame:
    """Read an external source: a connector's name (``iot``/``generator``, ``kafka``, ``files``,
    ``delta``, see :mod:`lakefeed.connectors.registry`) or any Spark format name. Streaming in
    stream modes, batch in backfill."""
    return read_source(source_format(kind), path, _stringify(options))


def dataset_named(name: str) -> str | None:
    """The dataset of its pipeline the flow being evaluated reads as ``name`` (a table name,
    maybe qualified with the pipeline's database); None when it names none, or outside a flow."""
    resolver = _RESOLVER.get()
    named = getattr(resolver, "dataset_named", None)
    return None if named is None else named(name)


def _stringify(options: Mapping[str, Any]) -> dict[str, str]:
    return {
        key: str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in options.items()
    }


stringify = _stringify  # options and properties given by other front ends (SDP)


def _pending(func: Callable[..., Any]) -> list[Expectation]:
    """Rules stacked under the dataset decorator wait on the function."""
    rules: list[Expectation] = func.__dict__.setdefault("__lakefeed_expectations__", [])
    return rules


def _declare(kind: DatasetKind, func: F | None, **kwargs: Any) -> Any:
    def register(fn: F) -> F:
        name = kwargs.pop("name", None) or fn.__name__
        output_mode = kwargs.get("output_mode")
        if output_mode is not None and output_mode not in OUTPUT_MODES:
            raise PipelineError([f"{name!r}: output_mode must be one of {OUTPUT_MODES}"])
        late_rows = kwargs.get("late_rows") or "drop"
        if late_rows not in LATE_ROWS:
            raise PipelineError([f"{name!r}: late_rows must be one of {LATE_ROWS}"])
        where = _where(fn)
        dataset = Dataset(
            name=name,
            kind=kind,
            func=fn,
            comment=kwargs.get("comment"),
            partition_cols=list(kwargs.get("partition_cols") or []),
            cluster_by=list(kwargs.get("cluster_by") or []),
            table_properties=_stringify(kwargs.get("table_properties") or {}),
            expectations=list(reversed(_pending(fn))),
            output_mode=output_mode,
            source=where,
            keys=list(kwargs.get("keys") or []),
            late_rows=late_rows,
            spark_conf=_stringify(kwargs.get("spark_conf") or {}),
        )
        current_pipeline().add(dataset)
        fn.__dict__["__lakefeed_dataset__"] = dataset
        return fn

    return register(func) if func is not None else register


@overload
def table(func: F, /) -> F: ...
@overload
def table(
    func: None = None,
    /,
    *,
    name: str | None = None,
    comment: str | None = None,
    partition_cols: list[str] | None = None,
    cluster_by: list[str] | None = None,
    table_properties: dict[str, str] | None = None,
    output_mode: str | None = None,
    keys: list[str] | None = None,
    late_rows: str = "drop",
    spark_conf: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...
def table(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    comment: str | None = None,
    partition_cols: list[str] | None = None,
    cluster_by: list[str] | None = None,
    table_properties: dict[str, str] | None = None,
    output_mode: str | None = None,
    keys: list[str] | None = None,
    late_rows: str = "drop",
    spark_conf: Mapping[str, Any] | None = None,
) -> F | Callable[[F], F]:
    """A streaming table: the function returns a DataFrame read with ``read_stream``/``source``.

    ``output_mode`` is picked automatically (append, or complete for an aggregate without a
    watermark); set it only to insist. With ``keys`` the table is upserted: each micro-batch's
    rows (an aggregate's changed groups: update mode) are MERGEd on those columns, exactly once.
    ``comment`` and ``table_properties`` are written to the Delta table (its description and
    ``metaData.configuration``), as ``COMMENT`` and ``TBLPROPERTIES`` are in SQL; ``cluster_by``
    makes it a clustered table, as ``CLUSTER BY (...)`` (never with ``partition_cols``).
    ``late_rows="keep"`` writes the rows the flow's watermark makes too late (which its stateful
    operator would drop, and Spark counts as ``numRowsDroppedByWatermark``) to ``<name>_late``,
    exactly once, instead of losing them. ``spark_conf`` (Spark SQL settings, e.g.
    ``{"spark.sql.shuffle.partitions": "8"}``) applies to this table's query alone.
    """
    return _declare(
        DatasetKind.STREAMING_TABLE,
        func,
        name=name,
        comment=comment,
        partition_cols=partition_cols,
        cluster_by=cluster_by,
        table_properties=table_properties,
        output_mode=output_mode,
        keys=keys,
        late_rows=late_rows,
        spark_conf=spark_conf,
    )


@overload
def materialized_view(func: F, /) -> F: ...
@overload
def materialized_view(
    func: None = None,
    /,
    *,
    name: str | None = None,
    comment: str | None = None,
    partition_cols: list[str] | None = None,
    cluster_by: list[str] | None = None,
    table_properties: dict[str, str] | None = None,
    spark_conf: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...
def materialized_view(
    func: F | None = None,
    /,
    *,
    name: str | None = None,
    comment: str | None = None,
    partition_cols: list[str] | None = None,
    cluster_by: list[str] | None = None,
    table_properties: dict[str, str] | None = None,
    spark_conf: Mapping[str, Any] | None = None,
) -> F | Callable[[F], F]:
    """A table recomputed in batch from its inputs each time the pipeline refreshes it;
    ``spark_conf`` applies to its refresh alone."""
    return _declare(
        DatasetKind.MATERIALIZED_VIEW,
        func,
        name=name,
        comment=comment,
        partition_cols=partition_cols,
        cluster_by=cluster_by,
        table_properties=table_properties,
        spark_conf=spark_conf,
    )


@overload
def view(func: F, /) -> F: ...
@overload
def view(
    func: None = None, /, *, name: str | None = None, comment: str | None = None
) -> Callable[[F], F]: ...
def view(
    func: F | None = None, /, *, name: str | None = None, comment: str | None = None
) -> F | Callable[[F], F]:
    """A named DataFrame other flows read; not stored, inlined into its readers."""
    return _declare(DatasetKind.VIEW, func, name=name, comment=comment)


def create_streaming_table(
    name: str,
    *,
    comment: str | None = None,
    partition_cols: list[str] | None = None,
    cluster_by: list[str] | None = None,
    table_properties: dict[str, str] | None = None,
    expect_all: Mapping[str, str] | None = None,
    expect_all_or_drop: Mapping[str, str] | None = None,
    expect_all_or_fail: Mapping[str, str] | None = None,
    spark_conf: Mapping[str, Any] | None = None,
) -> None:
    """Declare a streaming table without a query; ``@append_flow(target=name)`` flows fill it.

    The expectations and ``spark_conf`` apply to every flow into the table (a flow's own
    ``spark_conf`` wins over it).
    """
    rules = [
        Expectation(rule, predicate, action)
        for action, given in (
            (Action.WARN, expect_all),
            (Action.DROP, expect_all_or_drop),
            (Action.FAIL, expect_all_or_fail),
        )
        for rule, predicate in (given or {}).items()
    ]

    def no_query() -> DataFrame:
        raise PipelineError([f"streaming table {name!r} is filled by its append flows"])

    current_pipeline().add(
        Dataset(
            name=name,
            kind=DatasetKind.STREAMING_TABLE,
            func=no_query,
            comment=comment,
            partition_cols=list(partition_cols or []),
            cluster_by=list(cluster_by or []),
            table_properties=_stringify(table_properties or {}),
            expectations=rules,
            source=caller(),
            declared=True,
            spark_conf=_stringify(spark_conf or {}),
        )
    )


def append_flow(
    *,
    target: str,
    name: str | None = None,
    once: bool = False,
    comment: str | None = None,
    spark_conf: Mapping[str, Any] | None = None,
) -> Callable[[F], F]:
    """Add the decorated function's DataFrame as a flow into streaming table ``target``.

    The flow's name defaults to the function's and names its checkpoint; ``once=True`` makes it
    a one-off batch backfill, appended once and not repeated unless the target is refreshed.
    ``spark_conf`` applies to this flow alone.
    """

    def register(fn: F) -> F:
        flow = AppendFlow(name or fn.__name__, target, fn, once, comment, _where(fn))
        flow.spark_conf = _stringify(spark_conf or {})
        current_pipeline().add_flow(flow)
        return fn

    return register


def _declare_sink(name: str, sink: Sink, where: str) -> None:
    def no_query() -> DataFrame:
        raise PipelineError([f"sink {name!r} is written by its append flows"])

    current_pipeline().add(
        Dataset(name, DatasetKind.SINK, no_query, source=where, declared=True, sink=sink)
    )


def create_sink(name: str, format: str, options: Mapping[str, Any] | None = None) -> None:  # noqa: A002 - DLT's parameter name
    """Declare sink ``name`` (DLT/SDP's ``create_sink``): ``@append_flow(target=name)`` flows
    stream into it; nothing of it is stored in the lakehouse but those flows' checkpoints.

    ``format``: ``"kafka"`` (``kafka.bootstrap.servers``, ``topic`` and the other options of
    Spark's Kafka sink; at-least-once, as Spark's), ``"delta"`` (``path`` or ``tableName``;
    exactly once by the flow's Delta ``txn``), ``"postgres"`` (``url``, ``dbtable`` and
    ``keys`` to upsert on, comma-separated; exactly once by its commit table), or any format
    Spark writes, its options passed to Spark's writer as they are. A full refresh resets the
    flows' checkpoints and leaves the sink's data alone, as in DLT.
    """
    _declare_sink(name, Sink(format, _stringify(options or {})), caller())


@overload
def foreach_batch_sink(func: F, /) -> F: ...
@overload
def foreach_batch_sink(func: None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...
def foreach_batch_sink(
    func: F | None = None, /, *, name: str | None = None
) -> F | Callable[[F], F]:
    """A sink whose flows call the decorated ``function(df, batch_id)`` for each micro-batch
    (DLT's ``foreach_batch_sink``; the sink is named ``name`` or after the function).

    Exactly once is the function's job, as with Spark's ``foreachBatch``: a batch is replayed
    after a crash with the same id. :func:`lakefeed.current_batch` gives the flow's query id
    (stable across restarts) and the batch id to record with each write, e.g.
    ``DeltaTable.merge(...).withTransaction(app_id, batch_id)``.
    """

    def register(fn: F) -> F:
        _declare_sink(name or fn.__name__, Sink(FOREACH_BATCH, func=fn), _where(fn))
        return fn

    return register(func) if func is not None else register


def create_auto_cdc_flow(
    target: str,
    source: str,
    keys: list[str] | list[Column],
    sequence_by: str | Column,
    ignore_null_updates: bool = False,
    apply_as_deletes: str | Column | None = None,
    apply_as_truncates: str | Column | None = None,
    column_list: list[str] | list[Column] | None = None,
    except_column_list: list[str] | list[Column] | None = None,
    stored_as_scd_type: int | str = 1,
    track_history_column_list: list[str] | list[Column] | None = None,
    track_history_except_column_list: list[str] | list[Column] | None = None,
    name: str | None = None,
    once: bool = False,
) -> None:
    """DLT's AUTO CDC: apply the change rows of dataset ``source`` to streaming table
    ``target`` (declared with :func:`create_streaming_table`), exactly once per micro-batch.

    Changes are ordered per key by ``sequence_by``; one no newer than what the target holds for
    its key never overwrites it. ``apply_as_deletes``/``apply_as_truncates`` (SQL text or
    Column) mark deletes and truncates; ``column_list``/``except_column_list`` choose the
    target's columns. ``stored_as_scd_type=2`` keeps history: a version per change of the
    tracked columns (``track_history_*``), valid from ``__START_AT`` to ``__END_AT``. The flow
    is named ``name``, which names its checkpoint; by default ``<target>_cdc`` (DLT names it
    after the target, but here flows and datasets share names). ``once=True`` makes it a
    one-off backfill, as in DLT: ``source`` is read whole, in batch, and its changes applied
    once; a full refresh of ``target`` applies them again. See docs/cdc.md.
    """
    current_pipeline().add_flow(
        auto_cdc_flow(
            caller(),
            target,
            name,
            once,
            source=source,
            keys=keys,
            sequence_by=sequence_by,
            ignore_null_updates=ignore_null_updates,
            apply_as_deletes=apply_as_deletes,
            apply_as_truncates=apply_as_truncates,
            column_list=column_list,
            except_column_list=except_column_list,
            stored_as_scd_type=stored_as_scd_type,
            track_history_column_list=track_history_column_list,
            track_history_except_column_list=track_history_except_column_list,
        )
    )


apply_changes = create_auto_cdc_flow  # DLT's older name


def auto_cdc_flow(
    where: str, target: str, name: str | None, once: bool = False, **given: Any
) -> AppendFlow:
    """The flow ``create_auto_cdc_flow`` (or a SQL ``AUTO CDC`` statement at ``where``) adds:
    it reads its source incrementally and applies the rows as changes; a ``once`` flow reads
    it whole, in batch, and applies it once."""
    cdc = AutoCdc.declare(where, **given)

    def changes() -> DataFrame:
        return read(cdc.source) if once else read_stream(cdc.source)

    flow = name or default_cdc_flow(target)
    return AppendFlow(flow, target, changes, once, source=where, cdc=cdc)


def default_cdc_flow(target: str) -> str:
    return f"{target}_cdc"


def create_auto_cdc_from_snapshot_flow(
    target: str,
    source: str | SnapshotFunction,
    keys: list[str] | list[Column],
    stored_as_scd_type: int | str = 1,
    track_history_column_list: list[str] | list[Column] | None = None,
    track_history_except_column_list: list[str] | list[Column] | None = None,
    name: str | None = None,
) -> None:
    """DLT's AUTO CDC FROM SNAPSHOT: keep streaming table ``target`` equal to the newest full
    snapshot of ``source``, as SCD type 1 (current rows) or 2 (a version per snapshot that
    changed a row's tracked columns, ``__START_AT``/``__END_AT`` being snapshot versions).

    ``source`` is a table or view of the pipeline, read whole on each update, or a function
    ``(latest_snapshot_version) -> (DataFrame, version) | None`` asked, from the version
    applied last (None at first), for the next snapshot until it answers None; versions are
    increasing integers. Keys missing from a snapshot are deleted (SCD1) or closed (SCD2). Each
    snapshot is applied once: its version is the ``txn`` of the commits applying it. The flow
    is named ``name``, by default ``<target>_snapshot_cdc``. See docs/cdc.md.
    """
    where = caller()
    cdc = snapshot.declare(
        where,
        source,
        keys=keys,
        stored_as_scd_type=stored_as_scd_type,
        track_history_column_list=track_history_column_list,
        track_history_except_column_list=track_history_except_column_list,
    )
    snapshots = (
        Snapshots(lambda latest: (read(source), (latest or 0) + 1), once_per_update=True)
        if isinstance(source, str)
        else Snapshots(source)
    )
    flow = AppendFlow(
        name or f"{target}_snapshot_cdc",
        target,
        snapshots.shape,
        source=where,
        cdc=cdc,
        snapshots=snapshots,
    )
    current_pipeline().add_flow(flow)


apply_changes_from_snapshot = create_auto_cdc_from_snapshot_flow  # DLT's older name


def _where(fn: Callable[..., Any]) -> str:
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else repr(fn)


def caller() -> str:
    """``file:line`` of the pipeline code calling into this package (maybe through dlt's)."""

    package = Path(__file__).parent
    here = (str(package), str(package.parent / "compat"))
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(here):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _expect(action: Action, rules: Mapping[str, str]) -> Callable[[F], F]:
    def attach(fn: F) -> F:
        new = [Expectation(rule, predicate, action) for rule, predicate in rules.items()]
        dataset: Dataset | None = fn.__dict__.get("__lakefeed_dataset__")
        if dataset is not None:  # the rule sits above @table
            dataset.expectations[:0] = new
        else:
            _pending(fn).extend(reversed(new))
        return fn

    return attach


def expect(name: str, predicate: str) -> Callable[[F], F]:
    """Keep rows failing ``predicate`` and count them."""
    return _expect(Action.WARN, {name: predicate})


def expect_or_drop(name: str, predicate: str) -> Callable[[F], F]:
    """Drop rows failing ``predicate`` (into ``<table>_quarantine``) and count them."""
    return _expect(Action.DROP, {name: predicate})


def expect_or_fail(name: str, predicate: str) -> Callable[[F], F]:
    """Stop the flow when a row fails ``predicate``; nothing of that batch is committed."""
    return _expect(Action.FAIL, {name: predicate})


def expect_all(rules: Mapping[str, str]) -> Callable[[F], F]:
    """Keep rows failing any of ``rules`` (name to predicate) and count them per rule."""
    return _expect(Action.WARN, rules)


def expect_all_or_drop(rules: Mapping[str, str]) -> Callable[[F], F]:
    """Drop rows failing any of ``rules`` (into ``<table>_quarantine``); counted per rule."""
    return _expect(Action.DROP, rules)


def expect_all_or_fail(rules: Mapping[str, str]) -> Callable[[F], F]:
    """Stop the flow when a row fails any of ``rules``; nothing of that batch is committed."""
    return _expect(Action.FAIL, rules)


pending_expectations = _pending  # rules stacked under another front end's decorator (SDP)
