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
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyspark
from pyspark.sql import DataFrame, SparkSession

from lakefeed.lakehouse import Lakehouse
from lakefeed.pipeline.api import Pipeline, resolving
from lakefeed.pipeline.context import flow_context
from lakefeed.pipeline.graph import Graph, Node
from lakefeed.pipeline.modes import PlanFacts

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
    # External sources per dataset, views' included: (format, options) as given to Spark.
    sources: dict[str, list[tuple[str, dict[str, str]]]] = field(default_factory=dict)
    bounds: CommittedInput | None = None
    _stack: list[str] = field(default_factory=list)

    def defines(self, name: str) -> bool:
        return name in self.pipeline.datasets

    def evaluate(self, name: str) -> DataFrame | None:
        """The dataset's DataFrame, or None when it failed (see ``errors``)."""
        try:
            return self._evaluate(name)
        except _Abort:
            return None

    def evaluate_all(self) -> Graph:
        for name in self.pipeline.datasets:
            self.evaluate(name)
        return self.graph()

    def graph(self) -> Graph:
        return Graph.of(
            Node(name, ds.kind, tuple(self.reads.get(name, ())))
            for name, ds in self.pipeline.datasets.items()
        )

    # -- Resolver protocol (called from lakefeed.read_stream/read/source)

    def read(self, name: str, streaming: bool, options: Mapping[str, str]) -> DataFrame:
        reader = self._stack[-1]
        if name not in self.reads[reader]:
            self.reads[reader].append(name)
        target = self.pipeline.datasets.get(name)
        if target is None or name in self._stack:
            raise _Abort(name)  # unknown reference or cycle: the graph reports both
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
        if self.mode == "inline" and not is_delta_table(path):
            upstream = self._upstream(name)
            if streaming:
                return upstream
            return self.spark.createDataFrame([], upstream.schema)
        if streaming and self.mode != "batch":
            return self.spark.readStream.format("delta").options(**options).load(path)
        if streaming and self.bounds is not None:
            options = self.bounds.bound("delta", options)
        return self.spark.read.format("delta").options(**options).load(path)

    def source(self, fmt: str, path: str | None, options: Mapping[str, str]) -> DataFrame:
        self.sources.setdefault(self._stack[-1], []).append((fmt, dict(options)))
        if self.mode == "batch" and self.bounds is not None:
            options = self.bounds.bound(fmt, options)
        reader = (self.spark.read if self.mode == "batch" else self.spark.readStream).format(fmt)
        reader = reader.options(**options)
        return reader.load(path) if path is not None else reader.load()

    # -- internals

    def _upstream(self, name: str) -> DataFrame:
        frame = self._evaluate(name)
        if frame is None:
            raise _Abort(name)
        return frame

    def _evaluate(self, name: str) -> DataFrame | None:
        if name in self.frames:
            return self.frames[name]
        if name in self.errors:
            raise _Abort(name)
        dataset = self.pipeline.datasets[name]
        self._stack.append(name)
        self.reads.setdefault(name, [])
        semantics = batch_semantics() if self.mode == "batch" else contextlib.nullcontext()
        try:
            with resolving(self), flow_context(name, self.lakehouse), semantics:
                frame = dataset.func()
        except _Abort:
            if len(self._stack) > 1:
                raise
            return None
        except Exception as error:  # a user's flow function: report, never crash validate
            self.errors[name] = _describe(name, dataset.source, error)
            if len(self._stack) > 1:
                raise _Abort(name) from error
            return None
        finally:
            self._stack.pop()
        if not isinstance(frame, DataFrame):
            self.errors[name] = (
                f"{name!r} ({dataset.source}) returned {type(frame).__name__}, not a DataFrame"
            )
            if self._stack:
                raise _Abort(name)
            return None
        self.frames[name] = frame
        return frame


_LIBRARIES = (
    str(Path(__file__).resolve().parents[1]),
    str(Path(pyspark.__file__).resolve().parents[1]),
    "<",
)


def _describe(name: str, where: str, error: Exception) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    user = [f for f in frames if not f.filename.startswith(_LIBRARIES)]
    at = f"{user[-1].filename}:{user[-1].lineno}" if user else where
    message = str(error).strip().split("\n")[0][:500]
    return f"{name!r} failed to evaluate at {at}: {type(error).__name__}: {message}"


def is_delta_table(path: str) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(path)


@contextlib.contextmanager
def batch_semantics() -> Iterator[None]:
    """Let streaming-only calls mean their batch equivalent while a flow is evaluated as batch.

    Over complete data, ``dropDuplicatesWithinWatermark`` is ``dropDuplicates`` (Spark refuses
    it on batch DataFrames); ``withWatermark`` is already a no-op on batch. Patched on every
    DataFrame class defining it (classic and Connect subclass the public one).
    """
    name = "dropDuplicatesWithinWatermark"
    classes = [c for c in (DataFrame, *DataFrame.__subclasses__()) if name in vars(c)]
    originals = {c: vars(c)[name] for c in classes}

    def patched(original):  # noqa: ANN001, ANN202
        def dedup(self: DataFrame, subset: list[str] | None = None) -> DataFrame:
            return self.dropDuplicates(subset) if not self.isStreaming else original(self, subset)

        return dedup

    for cls, original in originals.items():
        setattr(cls, name, patched(original))
    try:
        yield
    finally:
        for cls, original in originals.items():
            setattr(cls, name, original)


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
_IDS = re.compile(r"#\d+L?|-T\d+ms")


def plan_facts(df: DataFrame) -> PlanFacts:
    """What the analysed plan says about state and event time (no query started)."""
    if not df.isStreaming:
        return PlanFacts(streaming=False)
    names: list[str] = []
    stateful: list[str] = []
    _walk(df._jdf.queryExecution().analyzed(), names, stateful)
    watermark = "EventTimeWatermark" in names
    return PlanFacts(
        streaming=True,
        aggregate="Aggregate" in names,
        watermark=watermark,
        stateful=stateful,
        unbounded_dedup="Deduplicate" in names and not watermark,
    )


def _walk(node, names: list[str], stateful: list[str]) -> None:  # noqa: ANN001 - py4j object
    name = node.nodeName()
    names.append(name)
    is_stream_join = name == "Join" and all(
        node.children().apply(i).isStreaming() for i in range(node.children().size())
    )
    if name in _STATEFUL or is_stream_join:
        stateful.append(_IDS.sub("", node.simpleString(50)) + _key_definitions(node))
    children = node.children()
    for i in range(children.size()):
        _walk(children.apply(i), names, stateful)


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
    """Spark's own check of a streaming plan for ``output_mode``, before any query starts."""
    jvm = df.sparkSession._jvm
    assert jvm is not None
    checker = jvm.org.apache.spark.sql.catalyst.analysis.UnsupportedOperationChecker
    modes = jvm.org.apache.spark.sql.streaming.OutputMode
    mode = {"append": modes.Append(), "complete": modes.Complete()}[output_mode]
    try:
        checker.checkForStreaming(df._jdf.queryExecution().analyzed(), mode)
    except Exception as error:  # py4j wraps Spark's AnalysisException
        text = str(error)
        match = re.search(r"\[[A-Z_.]+\][^\n]*", text)
        return match.group(0) if match else text.split("\n")[0]
    return None


def table_has_rows(path: str) -> bool:
    """Whether a Delta table holds any row (by file statistics; no Spark job)."""
    if not is_delta_table(path):
        return False
    from deltalake import DeltaTable

    actions = DeltaTable(path).get_add_actions(flatten=True)
    if actions.num_rows == 0:
        return False
    if "num_records" in actions.column_names:
        counts = actions.column("num_records").to_pylist()
        if all(c is not None for c in counts):
            return sum(counts) > 0
    return True
