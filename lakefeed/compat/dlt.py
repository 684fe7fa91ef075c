"""Databricks DLT's ``import dlt`` API, so DLT pipeline files run unchanged.

While lakefeed loads a pipeline file, ``sys.modules["dlt"]`` is this module (see
:func:`installed`); before and after, it is whatever was there, so dlthub's ``dlt`` package is
never shadowed outside loading. Each function maps onto lakefeed's own API with DLT's signature;
a parameter lakefeed cannot honour is refused with its name and what to do instead.

``@dlt.table`` is DLT's: a streaming table when its query reads a stream, a materialized view
when it reads in batch (decided when the pipeline is validated). ``schema=`` declares the
table's columns (:mod:`lakefeed.pipeline.table_schema`) and ``spark_conf=`` its flows' Spark
settings; a ``private``/``temporary`` table is stored but not published by name (see
:meth:`lakefeed.core.lakehouse.Lakehouse.private_tables`); ``path=`` stores a table at a
location of its own (:mod:`lakefeed.pipeline.table_paths`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any, TypeVar

from lakefeed.compat.errors import DLT_UNSUPPORTED as UNSUPPORTED
from lakefeed.core.errors import PipelineDefinitionError
from lakefeed.pipeline import api, table_paths
from lakefeed.pipeline.api import (
    expect,
    expect_all,
    expect_all_or_drop,
    expect_all_or_fail,
    expect_or_drop,
    expect_or_fail,
    materialized_view,
    read,
    read_stream,
)
from lakefeed.pipeline.table_schema import DeclaredSchema

F = TypeVar("F", bound=Callable[..., Any])


__all__ = [
    "append_flow",
    "apply_changes",
    "apply_changes_from_snapshot",
    "create_auto_cdc_flow",
    "create_auto_cdc_from_snapshot_flow",
    "create_sink",
    "create_streaming_table",
    "expect",
    "expect_all",
    "expect_all_or_drop",
    "expect_all_or_fail",
    "expect_or_drop",
    "expect_or_fail",
    "foreach_batch_sink",
    "materialized_view",
    "read",
    "read_stream",
    "table",
    "view",
]


def _refuse(what: str, given: Mapping[str, Any], fix: str) -> None:
    """One clear error for the parameters lakefeed cannot honour (unset ones pass)."""
    used = sorted(key for key, value in given.items() if value not in (None, False, [], {}, ""))
    if used:
        raise PipelineDefinitionError(
            f"{what}: {', '.join(used)} not supported by lakefeed", fix=fix, code=UNSUPPORTED
        )


_STORAGE_FIX = (
    "remove it: name clustering columns with cluster_by=[...] (lakefeed cannot choose them); "
    "row filters are a Unity Catalog feature, so filter in the query instead"
)


def table(
    query_function: F | None = None,
    *,
    name: str | None = None,
    comment: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    table_properties: Mapping[str, str] | None = None,
    path: str | None = None,
    partition_cols: list[str] | None = None,
    cluster_by: list[str] | None = None,
    cluster_by_auto: bool = False,
    schema: Any = None,
    row_filter: str | None = None,
    temporary: bool = False,
    private: bool = False,
) -> Any:
    """DLT's ``@dlt.table``: a streaming table or a materialized view, by its query;
    ``private``/``temporary`` ones are read by the pipeline's flows only (not published)."""

    def register(fn: F) -> F:
        _refuse(
            f"@dlt.table {name or fn.__name__!r}",
            {"cluster_by_auto": cluster_by_auto, "row_filter": row_filter},
            _STORAGE_FIX,
        )
        api.table(
            name=name,
            comment=comment,
            partition_cols=partition_cols,
            cluster_by=cluster_by,
            table_properties=dict(table_properties or {}),
            spark_conf=spark_conf,
        )(fn)
        dataset = fn.__dict__["__lakefeed_dataset__"]
        dataset.infer_kind = True
        dataset.schema = _declared(schema, dataset.name)
        dataset.private = private or temporary
        dataset.path = table_paths.location(path, dataset.name)
        return fn

    return register(query_function) if query_function is not None else register


def view(
    query_function: F | None = None, *, name: str | None = None, comment: str | None = None
) -> Any:
    """DLT's ``@dlt.view``: a named DataFrame, not stored."""
    register = api.view(name=name, comment=comment)
    return register(query_function) if query_function is not None else register


def create_streaming_table(
    name: str,
    *,
    comment: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    table_properties: Mapping[str, str] | None = None,
    partition_cols: list[str] | None = None,
    cluster_by: list[str] | None = None,
    cluster_by_auto: bool = False,
    path: str | None = None,
    schema: Any = None,
    expect_all: Mapping[str, str] | None = None,
    expect_all_or_drop: Mapping[str, str] | None = None,
    expect_all_or_fail: Mapping[str, str] | None = None,
    row_filter: str | None = None,
) -> None:
    """DLT's ``dlt.create_streaming_table``: a target for ``@dlt.append_flow`` flows."""
    _refuse(
        f"dlt.create_streaming_table({name!r})",
        {"cluster_by_auto": cluster_by_auto, "row_filter": row_filter},
        _STORAGE_FIX,
    )
    api.create_streaming_table(
        name,
        comment=comment,
        partition_cols=partition_cols,
        cluster_by=cluster_by,
        table_properties=dict(table_properties or {}),
        expect_all=expect_all,
        expect_all_or_drop=expect_all_or_drop,
        expect_all_or_fail=expect_all_or_fail,
        spark_conf=spark_conf,
    )
    dataset = api.current_pipeline().datasets[name]
    dataset.schema = _declared(schema, name)
    dataset.path = table_paths.location(path, name)


def _declared(schema: Any, table: str) -> DeclaredSchema | None:
    """DLT's ``schema=`` (a DDL string or a StructType), None when not given."""
    return None if schema is None else DeclaredSchema.of(schema, table)


def append_flow(
    *,
    target: str,
    name: str | None = None,
    comment: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    once: bool = False,
) -> Callable[[F], F]:
    """DLT's ``@dlt.append_flow``: one more flow into a streaming table."""
    return api.append_flow(
        target=target, name=name, once=once, comment=comment, spark_conf=spark_conf
    )


def _cdc_flow(
    name: str, flow: Callable[..., None], once_refused: str | None = None
) -> Callable[..., None]:
    """DLT's ``dlt.<name>``: lakefeed's function of that name with the same parameters, DLT's
    ``flow_name`` (``apply_changes``' spelling) taken as ``name``; ``once=True`` refused with
    the fix ``once_refused`` where lakefeed has no one-off form of the flow."""

    def dlt_flow(
        *args: Any, once: bool = False, flow_name: str | None = None, **kwargs: Any
    ) -> None:
        kwargs["name"] = kwargs.get("name") or flow_name
        if once_refused is None:
            flow(*args, once=once, **kwargs)
            return
        _refuse(f"dlt.{name}", {"once": once}, once_refused)
        flow(*args, **kwargs)

    dlt_flow.__name__ = dlt_flow.__qualname__ = name
    dlt_flow.__doc__ = f"DLT's ``dlt.{name}``: :func:`lakefeed.{name}`, same parameters."
    return dlt_flow


create_auto_cdc_flow = _cdc_flow("create_auto_cdc_flow", api.create_auto_cdc_flow)
apply_changes = create_auto_cdc_flow
create_auto_cdc_from_snapshot_flow = _cdc_flow(
    "create_auto_cdc_from_snapshot_flow",
    api.create_auto_cdc_from_snapshot_flow,
    "remove once=True: a snapshot flow applies each new snapshot on every update",
)
apply_changes_from_snapshot = create_auto_cdc_from_snapshot_flow
create_sink = api.create_sink  # DLT's signature: (name, format, options)
foreach_batch_sink = api.foreach_batch_sink  # @dlt.foreach_batch_sink(name=...)


@contextlib.contextmanager
def installed() -> Iterator[ModuleType]:
    """``import dlt`` gives this module inside the block; what was there before comes back (a
    :class:`lakefeed.pipeline.loader.Surface`)."""
    module = sys.modules[__name__]
    missing = object()
    previous = sys.modules.get("dlt", missing)
    sys.modules["dlt"] = module
    try:
        yield module
    finally:
        if previous is missing:
            sys.modules.pop("dlt", None)
        else:
            sys.modules["dlt"] = previous  # type: ignore[assignment]
