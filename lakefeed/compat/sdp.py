"""Spark Declarative Pipelines code (``from pyspark import pipelines as dp``), run by lakefeed.

pyspark's own decorators (``@dp.table``, ``@dp.materialized_view``, ``@dp.temporary_view``,
``dp.create_streaming_table``, ``@dp.append_flow``, ...) build ``Output`` and ``Flow`` objects
and hand them to the active ``GraphElementRegistry``, a context variable that ``spark-pipelines``
sets to a registry sending them to a Spark Connect server. While lakefeed loads a pipeline, its
:class:`LakefeedRegistry` is the active one and turns each into a lakefeed dataset or append
flow, so the files run unchanged on lakefeed's runtime (Delta tables, expectations, guard, event
log). A lakefeed expectation stacked under a ``dp`` decorator applies as with ``@lf.table``.

SDP flows read other datasets with ``spark.read.table(name)`` / ``spark.readStream.table(name)``.
While the files load, those two methods are routed (the patch table's ``TABLE_READS`` rows,
:func:`lakefeed.compat.patches.route_pipeline_reads`) to read a dataset of the pipeline being
evaluated as ``lf.read`` / ``lf.read_stream`` do; any other name, and any call outside a flow
evaluation, reaches Spark's own method.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from pyspark.pipelines.flow import AutoCdcFlow, Flow
from pyspark.pipelines.graph_element_registry import (
    GraphElementRegistry,
    graph_element_registration_context,
)
from pyspark.pipelines.output import (
    MaterializedView,
    Output,
    Sink,
    StreamingTable,
    TemporaryView,
)
from pyspark.pipelines.source_code_location import SourceCodeLocation
from pyspark.sql import DataFrame

from lakefeed.compat import patches
from lakefeed.compat.errors import SDP_UNSUPPORTED as UNSUPPORTED
from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.pipeline import api
from lakefeed.pipeline.api import AppendFlow, Dataset, Pipeline, pending_expectations
from lakefeed.pipeline.kinds import DatasetKind
from lakefeed.pipeline.loader import add_sql
from lakefeed.pipeline.sinks import Sink as LakefeedSink
from lakefeed.pipeline.sql import parse_sql
from lakefeed.pipeline.table_schema import DeclaredSchema

_KINDS = {
    StreamingTable: DatasetKind.STREAMING_TABLE,
    MaterializedView: DatasetKind.MATERIALIZED_VIEW,
    TemporaryView: DatasetKind.VIEW,
}


class LakefeedRegistry(GraphElementRegistry):
    """pyspark's graph elements as lakefeed datasets and append flows of ``pipeline``."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def register_output(self, output: Output) -> None:
        where = _where(output.source_code_location)
        name = self._own(output.name, where)
        if isinstance(output, Sink):  # dp.create_sink: lakefeed's own sinks
            sink = LakefeedSink(output.format, api.stringify(output.options or {}))
            self.pipeline.add(
                Dataset(
                    name,
                    DatasetKind.SINK,
                    _no_query(name),
                    comment=output.comment,
                    source=where,
                    declared=True,
                    sink=sink,
                )
            )
            return
        kind = _KINDS.get(type(output))
        if kind is None:
            _refuse(
                f"{type(output).__name__} {name!r} ({where})",
                "declare a table, materialized view, temporary view or sink",
            )
        if kind is not DatasetKind.VIEW:
            _check_table(output, where)
        self.pipeline.add(
            Dataset(
                name=name,
                kind=kind,
                func=_no_query(name),
                comment=output.comment,
                partition_cols=list(getattr(output, "partition_cols", None) or []),
                cluster_by=list(getattr(output, "cluster_by", None) or []),
                table_properties=api.stringify(getattr(output, "table_properties", None) or {}),
                source=where,
                declared=kind is DatasetKind.STREAMING_TABLE,
                schema=_declared(output, name),
            )
        )

    def register_flow(self, flow: Flow) -> None:
        where = _where(flow.source_code_location)
        conf = api.stringify(flow.spark_conf or {})
        name, target_name = self._own(flow.name, where), self._own(flow.target, where)
        target = self.pipeline.datasets.get(target_name)
        own = target is not None and target.sink is None and name == target_name
        if own and target is not None and _has_no_query(target):
            # The dataset's own query (@dp.table / materialized_view / temporary_view)
            target.func, target.declared, target.source = flow.func, False, where
            target.expectations = list(reversed(pending_expectations(flow.func)))
            target.spark_conf = conf
            return
        appended = AppendFlow(name, target_name, flow.func, source=where, spark_conf=conf)
        self.pipeline.add_flow(appended)

    def register_auto_cdc_flow(self, flow: AutoCdcFlow) -> None:
        """``dp.create_auto_cdc_flow``: its Spark Connect Columns back to SQL text. SDP names
        an unnamed flow after its target; here flows and datasets share names, so such a flow
        gets lakefeed's default (``<target>_cdc``)."""
        where = _where(flow.source_code_location)
        target = self._own(flow.target, where)
        named = None if flow.name in (None, flow.target) else self._own(flow.name, where)
        cdc_flow = api.auto_cdc_flow(
            where,
            target,
            named,
            source=self.pipeline.namespace.local(flow.source) or flow.source,
            keys=[_sql(c) for c in flow.keys],
            sequence_by=_sql(flow.sequence_by),
            apply_as_deletes=_sql(flow.apply_as_deletes),
            column_list=[_sql(c) for c in flow.column_list or []],
            except_column_list=[_sql(c) for c in flow.except_column_list or []],
            stored_as_scd_type=flow.stored_as_scd_type or 1,
            track_history_column_list=[_sql(c) for c in flow.track_history_column_list or []],
            track_history_except_column_list=[
                _sql(c) for c in flow.track_history_except_column_list or []
            ],
        )
        cdc_flow.spark_conf = api.stringify(flow.spark_conf or {})
        self.pipeline.add_flow(cdc_flow)

    def _own(self, name: str, where: str) -> str:
        """A dataset or flow name as the pipeline keeps it: ``sales.orders`` in a pipeline of
        database ``sales`` is ``orders``; another database's name is refused."""
        return self.pipeline.namespace.own(name, where)

    def register_sql(self, sql_text: str, file_path: Any) -> None:
        for flow in parse_sql(sql_text, str(file_path)):
            add_sql(self.pipeline, flow)


@contextlib.contextmanager
def registering() -> Iterator[None]:
    """``dp`` decorators run inside the block declare into the pipeline being loaded (a
    :class:`lakefeed.pipeline.loader.Surface`)."""
    patches.route_pipeline_reads()
    with graph_element_registration_context(LakefeedRegistry(api.current_pipeline())):
        yield


def _has_no_query(dataset: Dataset) -> bool:
    return getattr(dataset.func, "__lakefeed_no_query__", False)


def _no_query(name: str) -> Callable[[], DataFrame]:
    def no_query() -> DataFrame:
        raise PipelineDefinitionError(
            f"dataset {name!r} has no query",
            fix=f"define one with a function named {name!r} under its decorator, or "
            f"@dp.append_flow(target={name!r})",
            code=UNSUPPORTED,
        )

    no_query.__dict__["__lakefeed_no_query__"] = True
    return no_query


def _check_table(output: Output, where: str) -> None:
    unsupported = {"format": getattr(output, "format", None) not in (None, "delta") or None}
    used = sorted(key for key, value in unsupported.items() if value)
    if used:
        _refuse(
            f"{output.name!r} ({where}): {', '.join(used)}",
            "remove it: lakefeed stores every table as Delta (partition_cols partitions it)",
        )


def _declared(output: Output, name: str) -> DeclaredSchema | None:
    """SDP's ``schema=`` of a table (a DDL string or a StructType), None when not given."""
    given = getattr(output, "schema", None)
    return None if given is None else DeclaredSchema.of(given, name)


def _refuse(what: str, fix: str) -> NoReturn:
    raise PipelineDefinitionError(f"{what} not supported by lakefeed", fix=fix, code=UNSUPPORTED)


def _sql(column: Any) -> Any:
    """A Spark Connect Column (pyspark's ``dp`` turns strings into them) as the SQL text it was
    written as (a name or an expression); a classic Column (the user's ``col()``/``expr()`` on
    lakefeed's classic session) as it is: its text would be ``Column<'seq'>``."""
    if column is None or hasattr(column, "_jc"):
        return column
    return str(getattr(column, "_expr", column))


def _where(location: SourceCodeLocation) -> str:
    return f"{location.filename}:{location.line_number}"
