"""Evaluate flow functions into DataFrames, recording what each one reads.

One evaluator per purpose:

- ``inline`` (validation and graph discovery): a read of another dataset returns that dataset's
  own DataFrame (or, for a batch read, an empty frame of its schema), so the whole graph is
  analysed before any table exists and without starting a query;
- ``stream`` (run): stored datasets are read back from their Delta tables, incrementally for
  ``read_stream``;
- ``batch`` (backfill, verify, materialized views): every read is a batch read; with
  ``bounds`` (verify), each source reads only the input the flow's checkpoint committed.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from lakefeed.cdc.apply import target_frame
from lakefeed.connectors import delta, registry
from lakefeed.core.explain import explain
from lakefeed.core.flow_context import flow_context, resolving
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import table as delta_table
from lakefeed.pipeline import dedup
from lakefeed.pipeline.api import AppendFlow, Dataset, Pipeline
from lakefeed.pipeline.graph import Graph, Node
from lakefeed.pipeline.output_modes import PlanFacts
from lakefeed.pipeline.sinks import read_refusal
from lakefeed.runtime.conform import conform
from lakefeed.runtime.late import Recompute, keep_late
from lakefeed.runtime.query_start import flow_conf
from lakefeed.spark import plan_text
from lakefeed.spark.session import evaluating_on

if TYPE_CHECKING:
    from lakefeed.runtime.committed import CommittedInput


class _Abort(Exception):
    """Stops evaluating a flow whose input cannot be resolved (reported elsewhere)."""


@dataclass
class Evaluator:
    spark: SparkSession
    pipeline: Pipeline
    lakehouse: Lakehouse
    mode: str  # "inline" | "stream" | "batch"
    reads: dict[str, list[str]] = field(default_factory=dict)
    frames: dict[str, DataFrame] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    causes: dict[str, BaseException] = field(default_factory=dict)  # errors' exceptions (--debug)
    # External sources per dataset, views' included: (format, options) as given to Spark.
    sources: dict[str, list[tuple[str, dict[str, str]]]] = field(default_factory=dict)
    bounds: CommittedInput | None = None
    _stack: list[str] = field(default_factory=list)
    _late: Recompute | None = None  # verify of a late_rows="keep" flow: see _late_kept

    def dataset_named(self, name: str) -> str | None:
        """The pipeline's dataset ``name`` gives (``x``, ``db.x``, ``cat.db.x`` in the
        pipeline's database), or None."""
        local = self.local_name(name)
        return local if local in self.pipeline.datasets else None

    def local_name(self, name: str) -> str | None:
        """The table of the pipeline's lakehouse ``name`` gives, a dataset or not; None for a
        table of another database."""
        return self.pipeline.namespace.local(name)

    def evaluate(self, name: str) -> DataFrame | None:
        """The dataset's DataFrame, or None when it failed (see ``errors``)."""
        try:
            return self._evaluate(name)
        except _Abort:
            return None

    def evaluate_flow(self, flow: AppendFlow) -> DataFrame | None:
        """One append flow's own DataFrame (what its query writes), keyed by the flow's name."""
        try:
            return self._compute(flow.name, flow.func, flow.source)
        except _Abort:
            return None

    def evaluate_all(self) -> Graph:
        for name, dataset in self.pipeline.datasets.items():
            if dataset.kind != "sink":  # a sink is only its flows
                self.evaluate(name)
            for flow in dataset.flows:
                self.evaluate_flow(flow)
        return self.graph()

    def graph(self) -> Graph:
        """Datasets and what they read; a table's append flows' reads (``once`` flows' too,
        which its streaming union leaves out) are the table's."""
        return Graph.of(
            Node(name, ds.kind, self._reads_of([name, *(f.name for f in ds.flows)]))
            for name, ds in self.pipeline.datasets.items()
        )

    def _reads_of(self, names: list[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(read for name in names for read in self.reads.get(name, ())))

    # -- Resolver protocol (called from lakefeed.read_stream/read/source)

    def read(self, name: str, streaming: bool, options: Mapping[str, str]) -> DataFrame:
        name = self.dataset_named(name) or name  # db.x in the pipeline's database: x
        reader = self._stack[-1]
        if name not in self.reads[reader]:
            self.reads[reader].append(name)
        target = self.pipeline.datasets.get(name)
        if target is None or name in self._stack:
            raise _Abort(name)  # unknown reference or cycle: the graph reports both
        if target.kind == "sink":
            self.errors.setdefault(reader, read_refusal(reader, name))
            raise _Abort(name)
        if streaming and target.kind == "materialized_view" and self.mode != "batch":
            self.errors.setdefault(
                reader,
                f"{reader!r} reads materialized view {name!r} with read_stream: a materialized "
                f"view is rewritten on each refresh; use lakefeed.read({name!r})",
            )
            raise _Abort(name)
        if target.kind == "view":
            frame = self._upstream(name)
            self.sources.setdefault(reader, []).extend(self.sources.get(name, []))
            return frame
        path = str(self.lakehouse.table_path(name))
        if self.mode == "inline" and not delta_table.exists(path):
            upstream = self._upstream(name)
            if streaming:
                return upstream
            return empty_frame(self.spark, upstream.schema)
        if streaming and self.mode != "batch":
            return delta.read_stream(self.spark, path, **options)
        if streaming and self.bounds is not None:
            options = self.bounds.bound("delta", options)
        frame = delta.read(self.spark, path, **options)
        return self._late.input(frame) if streaming and self._late is not None else frame

    def source(self, fmt: str, path: str | None, options: Mapping[str, str]) -> DataFrame:
        """An outside source; streaming in stream modes except where a materialized view reads
        it (recomputed whole on each refresh, as DLT's and SQL's ``FROM read_files(...)``)."""
        flow = self._stack[-1]
        dataset = self.pipeline.datasets.get(flow)
        recomputed = dataset is not None and dataset.kind == "materialized_view"
        streaming = self.mode != "batch" and not recomputed
        connector = registry.find(fmt)
        if connector is None:  # any other Spark format, read as Spark reads it
            self.sources.setdefault(flow, []).append((fmt, _with_path(options, path)))
            reader = (self.spark.readStream if streaming else self.spark.read).format(fmt)
            reader = reader.options(**options)
            return reader.load(path) if path is not None else reader.load()
        schema_path = str(self.lakehouse.schema_path(flow))
        options = {**connector.pipeline_defaults(schema_path, options), **options}
        self.sources.setdefault(flow, []).append((connector.format, _with_path(options, path)))
        if not streaming and self.bounds is not None:
            options = self.bounds.bound(connector.format, options)
        frame = connector.read(self.spark, path, options, streaming=streaming)
        return self._late.input(frame) if self._late is not None else frame

    # -- internals

    def _upstream(self, name: str) -> DataFrame:
        frame = self._evaluate(name)
        if frame is None:
            raise _Abort(name)
        return frame

    def _evaluate(self, name: str) -> DataFrame | None:
        dataset = self.pipeline.datasets[name]
        body = (lambda: self._union(dataset)) if dataset.declared else dataset.func
        return self._compute(name, body, dataset.source)

    def _union(self, dataset: Dataset) -> DataFrame:
        """A table filled by append flows reads as all of them: ``once`` backfills and snapshot
        flows only in batch (a stream cannot union a batch), unless the table has nothing else."""
        flows = [f for f in dataset.flows if self.mode == "batch" or not f.batch] or dataset.flows
        return union_all([_shaped(flow) for flow in flows])

    def _compute(self, name: str, func: Callable[[], DataFrame], where: str) -> DataFrame | None:
        if name in self.frames:
            return self.frames[name]
        if name in self.errors:
            raise _Abort(name)
        nested = bool(self._stack)
        declared = self._declared(name)
        if declared is not None:
            func = _conformed(func, declared)
        try:
            with self.inside(name), self._late_recompute(name):
                frame = self._late_kept(name, func())
        except _Abort:
            if nested:
                raise
            return None
        except Exception as error:  # a user's flow function: report, never crash validate
            self.errors[name] = _describe(name, where, error)
            self.causes[name] = error
            if nested:
                raise _Abort(name) from error
            return None
        if not isinstance(frame, DataFrame):
            self.errors[name] = (
                f"{name!r} ({where}) returned {type(frame).__name__}, not a DataFrame"
            )
            if self._stack:
                raise _Abort(name)
            return None
        if self.mode == "batch":
            frame = batch_plan(frame)
        self.frames[name] = frame
        return frame

    def _declared(self, name: str) -> Dataset | None:
        """The table whose declared schema (``schema=``) the rows of ``name`` take: the
        dataset's own, or an append flow's target's; None for AUTO CDC (its target's shape is
        the change feed's) and tables without one."""
        flow = self.pipeline.append_flows.get(name)
        dataset = self.pipeline.datasets.get(flow.target if flow is not None else name)
        if dataset is None or dataset.schema is None or dataset.cdc_state is not None:
            return None
        return dataset

    @contextlib.contextmanager
    def inside(self, name: str) -> Iterator[None]:
        """``lf.read`` and the like resolved as in flow ``name``: for evaluating its function,
        and for code the runner calls itself (a snapshot flow's source function)."""
        self._stack.append(name)
        self.reads.setdefault(name, [])
        conf = self.pipeline.spark_conf_of(name)
        try:
            with (
                resolving(self),
                evaluating_on(self.spark),
                flow_context(name, self.lakehouse),
                flow_conf(self.spark, conf, name),
            ):
                yield
        finally:
            self._stack.pop()

    def _late_kept(self, name: str, frame: DataFrame) -> DataFrame:
        """A running flow with ``late_rows="keep"`` splits its late rows off; its recompute
        (verify) leaves them out where they were split off (see late.py)."""
        dataset = self.pipeline.datasets.get(name)
        if dataset is None or dataset.late_table is None or not isinstance(frame, DataFrame):
            return frame  # not a DataFrame: refused by the caller
        if self._late is not None and self._late.flow == name:
            return self._late.result(frame)
        if self.mode != "stream":
            return frame
        late_table = str(self.lakehouse.table_path(dataset.late_table))
        return keep_late(frame, name, str(self.lakehouse.checkpoint_path(name)), late_table)

    @contextlib.contextmanager
    def _late_recompute(self, name: str) -> Iterator[None]:
        """While a ``late_rows="keep"`` flow is recomputed over its committed input (verify),
        its streaming reads go through :class:`~lakefeed.runtime.late.Recompute`; nothing to
        leave out before the stream kept a first late row."""
        kept = self._kept_late(name)
        if kept is None:
            yield
            return
        self._late = Recompute(name, kept)
        try:
            yield
        finally:
            self._late = None

    def _kept_late(self, name: str) -> DataFrame | None:
        """The rows the stream of flow ``name`` kept as late, when this evaluation recomputes
        it over its committed input (verify) and it kept some."""
        dataset = self.pipeline.datasets.get(name)
        if dataset is None or dataset.late_table is None:
            return None
        if self.mode != "batch" or self.bounds is None:
            return None
        late_table = str(self.lakehouse.table_path(dataset.late_table))
        return delta.read(self.spark, late_table) if delta_table.exists(late_table) else None


def _conformed(func: Callable[[], DataFrame], table: Dataset) -> Callable[[], DataFrame]:
    """``func`` whose DataFrame takes ``table``'s declared schema (see :mod:`.conform`)."""

    def conformed() -> DataFrame:
        frame = func()
        if not isinstance(frame, DataFrame) or table.schema is None:
            return frame
        return conform(frame, table.schema, table.name)

    return conformed


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """A batch DataFrame without rows: a ``LocalRelation`` made in a few JVM calls.

    ``spark.createDataFrame([], schema)`` ships an empty Python RDD through about forty calls,
    which made it the largest part of validating a pipeline of many materialized views.
    """
    jspark = getattr(spark, "_jsparkSession", None)
    if jspark is None or spark._jvm is None:  # Spark Connect
        return spark.createDataFrame([], schema)
    rows = spark._jvm.java.util.ArrayList()
    jdf = jspark.createDataFrame(rows, jspark.parseDataType(schema.json()))
    return DataFrame(jdf, spark)


def union_all(frames: list[DataFrame]) -> DataFrame:
    """The rows of every frame, columns matched by name (a column one lacks is null there)."""
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame, allowMissingColumns=True)
    return union


def _describe(name: str, where: str, error: Exception) -> str:
    failure = explain(error)
    return f"{name!r} failed to evaluate at {failure.where or where}: {failure.message}"


def _with_path(options: Mapping[str, str], path: str | None) -> dict[str, str]:
    """A source's options as recorded for its events and name (its path among them)."""
    return {**options, "path": path} if path is not None else dict(options)


_WITHIN_WATERMARK = "DeduplicateWithinWatermark"


def batch_plan(frame: DataFrame) -> DataFrame:
    """``frame`` with streaming-only operators given their batch meaning, for a batch evaluation.

    Over complete data, ``dropDuplicatesWithinWatermark`` is ``dropDuplicates``: Spark builds the
    batch plan but refuses to run it, so its ``DeduplicateWithinWatermark`` nodes become
    ``Deduplicate`` (same keys) in a copy of the analysed plan. ``withWatermark`` is already a
    no-op on batch. Nothing process-wide changes, so flows evaluated in other threads (continuous
    flows' ``foreachBatch``) are untouched; a frame without such nodes is returned as it is.
    """
    if frame.isStreaming:
        return frame
    if getattr(frame.sparkSession, "_jvm", None) is None:  # Spark Connect
        return _connect_batch_plan(frame)
    jdf = frame._jdf
    plan = jdf.queryExecution().analyzed()
    rewritten = _dedup_as_batch(plan, frame.sparkSession._jvm)
    if rewritten is plan:
        return frame
    jvm = frame.sparkSession._jvm
    assert jvm is not None
    session = frame.sparkSession._jsparkSession
    return DataFrame(
        jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, rewritten), frame.sparkSession
    )


def _connect_batch_plan(frame: DataFrame) -> DataFrame:
    """:func:`batch_plan` for a Spark Connect frame: its client-side plan says which
    ``Deduplicate`` nodes are within a watermark. The frame was made for this batch evaluation
    alone, so its nodes are changed in place (plan ids, which columns refer to, stay)."""
    # deferred: Spark Connect's client needs the optional extra lakefeed[connect]
    from pyspark.sql.connect.plan import Deduplicate, LogicalPlan

    seen: set[int] = set()
    pending: list[object] = [frame._plan]
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Deduplicate):
            node.within_watermark = False
        for value in vars(node).values():
            values = value if isinstance(value, list | tuple) else [value]
            pending.extend(v for v in values if isinstance(v, LogicalPlan))
    return frame


def _dedup_as_batch(node, jvm):  # noqa: ANN001, ANN202 - py4j objects
    """``node`` with every ``DeduplicateWithinWatermark`` below it made a ``Deduplicate``; the
    same object when there is none."""
    children = [node.children().apply(i) for i in range(node.children().size())]
    rewritten = [_dedup_as_batch(child, jvm) for child in children]
    if node.nodeName() == _WITHIN_WATERMARK:
        # Same constructor arguments (keys, child, spec), the child rewritten.
        arguments = [node.productElement(i) for i in range(node.productArity())]
        arguments[arguments.index(children[0])] = rewritten[0]
        return jvm.org.apache.spark.sql.catalyst.plans.logical.Deduplicate(*arguments)
    if all(new is old for new, old in zip(rewritten, children, strict=True)):
        return node
    converters = jvm.scala.jdk.javaapi.CollectionConverters
    return node.withNewChildren(converters.asScala(rewritten).toSeq())


# -- plan facts --------------------------------------------------------------------------------

_STATEFUL = {
    "Aggregate",
    "Deduplicate",
    "DeduplicateWithinWatermark",
    "FlatMapGroupsWithState",
    "FlatMapGroupsInPandasWithState",
    "TransformWithState",
    "TransformWithStateInPySpark",
}
_JOIN = re.compile(r"\W*Join\b")  # Spark may mark the node's string ('~Join LeftOuter, ...')
_IDS = re.compile(r"#\d+L?|-T\d+ms")
_STATIC_JOIN = "StaticJoin"  # a Join of a streaming and a batch side, as the walks name it


def plan_facts(df: DataFrame) -> PlanFacts:
    """What the analysed plan says about state and event time (no query started)."""
    if not df.isStreaming:
        return PlanFacts(streaming=False)
    names: list[str] = []  # a stream–static join adds "StaticJoin"
    stateful: list[str] = []
    # (time mode, processor class) of transformWithState operators (none read under Connect)
    processors: list[tuple[str, str]] = []
    if getattr(df.sparkSession, "_jvm", None) is None:  # Spark Connect: the printed plan
        printed = df._explain_string(extended=True)  # type: ignore[operator]  # a Connect method
        _walk_text(plan_text.analyzed_tree(printed), names, stateful)
    else:
        _walk(df._jdf.queryExecution().analyzed(), names, stateful, processors)
    watermark = "EventTimeWatermark" in names
    ttl_dedups = sum(processor == dedup.PROCESSOR for _, processor in processors)
    return PlanFacts(
        streaming=True,
        aggregate="Aggregate" in names,
        watermark=watermark,
        stateful=stateful,
        unbounded_dedup="Deduplicate" in names and not watermark,
        stream_join=any(_JOIN.match(s) for s in stateful),
        static_join=_STATIC_JOIN in names,
        sources=sum(n in ("StreamingRelation", "StreamingRelationV2") for n in names),
        processing_time_timers=any("ProcessingTime" in mode for mode, _ in processors),
        # Spark refuses Avro state for its other operators (lakefeed.runtime.query_start)
        state_encoding="avro" if stateful and ttl_dedups == len(stateful) else None,
    )


def watermarks(df: DataFrame) -> list[tuple[str, str]]:
    """``(event-time column, delay)`` of each ``withWatermark`` in the plan, outermost first."""
    found: list[tuple[str, str]] = []
    pending = [df._jdf.queryExecution().analyzed()]
    while pending:
        node = pending.pop()
        if node.nodeName() == "EventTimeWatermark":
            found.append((str(node.eventTime().name()), str(node.delay().toString())))
        pending.extend(reversed(_seq(node.children())))
    return found


def _walk(node, names: list[str], stateful: list[str], processors: list[tuple[str, str]]) -> None:  # noqa: ANN001 - py4j object
    """Collect the plan's node names, its stateful operators and, of each transformWithState,
    its time mode and its processor's class (a Python processor's: empty)."""
    name = node.nodeName()
    names.append(name)
    if "TransformWithState" in name:
        jvm_processor = name == "TransformWithState"
        processor = node.statefulProcessor().getClass().getName() if jvm_processor else ""
        processors.append((str(node.timeMode()), processor))
    streaming = [node.children().apply(i).isStreaming() for i in range(node.children().size())]
    is_stream_join = name == "Join" and all(streaming)
    if name == "Join" and any(streaming) and not all(streaming):
        names.append(_STATIC_JOIN)
    if name in _STATEFUL or is_stream_join:
        stateful.append(_IDS.sub("", node.simpleString(50)) + _key_definitions(node))
    children = node.children()
    for i in range(children.size()):
        _walk(children.apply(i), names, stateful, processors)


def _walk_text(root: plan_text.PlanNode, names: list[str], stateful: list[str]) -> None:
    """:func:`_walk` over a printed plan (Spark Connect): the same names and strings."""
    for node in root.walk():
        names.append(node.name)
        streaming = [c.streaming for c in node.children]
        is_stream_join = node.name == "Join" and all(streaming)
        if node.name == "Join" and any(streaming) and not all(streaming):
            names.append(_STATIC_JOIN)
        if node.name in _STATEFUL or is_stream_join:
            defined = [_IDS.sub("", d) for d in plan_text.key_definitions(node)]
            keys = f" keys: {'; '.join(defined)}" if defined else ""
            stateful.append(_IDS.sub("", node.text) + keys)


def _seq(scala_seq) -> list:  # noqa: ANN001 - py4j Seq
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


def _key_definitions(node) -> str:  # noqa: ANN001 - py4j object
    """How grouping keys are computed (e.g. the window length), which the operator itself
    shows only as an attribute name: a change there changes what the saved state means."""
    if node.nodeName() != "Aggregate" or node.child().nodeName() != "Project":
        return ""
    keys = {str(k.toString()) for k in _seq(node.groupingExpressions())}
    defined = [
        _IDS.sub("", str(e.toString()))
        for e in _seq(node.child().projectList())
        if str(e.toAttribute().toString()) in keys and e.nodeName() == "Alias"
    ]
    return f" keys: {'; '.join(defined)}" if defined else ""


def spark_refusal(df: DataFrame, output_mode: str) -> str | None:
    """Spark's own check of a streaming plan for ``output_mode``, before any query starts
    (under Spark Connect the check has no client entry point: Spark makes it at start)."""
    jvm = getattr(df.sparkSession, "_jvm", None)
    if jvm is None:
        return None
    checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
    modes = jvm.org.apache.spark.sql.streaming.OutputMode
    mode = {"append": modes.Append(), "complete": modes.Complete(), "update": modes.Update()}[
        output_mode
    ]
    try:
        checker.checkForStreaming(df._jdf.queryExecution().analyzed(), mode)
    except Exception as error:  # py4j wraps Spark's AnalysisException
        text = str(error)
        match = re.search(r"\[[A-Z_.]+\][^\n]*", text)
        return match.group(0) if match else text.split("\n")[0]
    return None


def _shaped(flow: AppendFlow) -> DataFrame:
    """A flow's rows as its target holds them: an AUTO CDC flow's changes take the target's
    shape (readers of the table see its columns, not the change feed's)."""
    frame = flow.func()
    return frame if flow.cdc is None else target_frame(flow.cdc, frame, flow.name)
