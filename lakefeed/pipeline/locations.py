"""Where a pipeline's flows read, found before any Spark session exists.

Spark's S3A jars can only be added when the session starts, but a landing folder or a source
table on ``s3://`` is only named when a flow function runs (``lf.read_files(path)``,
``spark.readStream.format("cloudFiles")...load(path)``, ``lf.source("delta", path=...)``),
and running it needs a session. So each flow function is run once against a stand-in
(:class:`_Recorder`) for the session, the pipeline's resolver and every DataFrame or reader
they return: any call on it notes the ``s3://`` / ``s3a://`` URIs among its arguments and
returns the stand-in again. Whatever a function does after its reads (``F.col`` needs a real
session and raises) ends its run; errors are ignored here, validation reports them later.
A location computed from Spark itself (``spark.conf.get``) is not found this way: pass it to
``lakefeed.spark_session(storage=[...])``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, suppress
from typing import Any

from lakefeed.lakehouse import Lakehouse
from lakefeed.pipeline.api import Pipeline, resolving
from lakefeed.pipeline.context import flow_context
from lakefeed.storage import is_object_store


class _Recorder:
    """The session, resolver, readers and DataFrames of a flow function, all at once."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def __getattr__(self, name: str) -> _Recorder:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> _Recorder:
        self._note([*args, *kwargs.values()])
        return self

    def __getitem__(self, key: Any) -> _Recorder:
        return self

    def __iter__(self) -> Iterator[Any]:
        return iter(())  # ``df.columns`` and the like: nothing (not endless indexing)

    def _note(self, values: Iterable[Any]) -> None:
        for value in values:
            if isinstance(value, Mapping):
                self._note(value.values())
            elif isinstance(value, str) and is_object_store(value):
                self.found.append(value)


def flow_locations(pipeline: Pipeline, lakehouse: Lakehouse) -> list[str]:
    """The object-store URIs the pipeline's flow functions read from (see the module doc)."""
    from lakefeed.session import evaluating_on

    recorder = _Recorder()
    for name, func in _functions(pipeline):
        with ExitStack() as scope:
            scope.enter_context(resolving(recorder))  # type: ignore[arg-type]
            scope.enter_context(evaluating_on(recorder))  # type: ignore[arg-type]
            scope.enter_context(flow_context(name, lakehouse))
            scope.enter_context(suppress(Exception))  # a user's function on a stand-in
            func()
    return list(dict.fromkeys(recorder.found))


def _functions(pipeline: Pipeline) -> list[tuple[str, Callable[[], Any]]]:
    """Each dataset's query and each append flow's, by the flow's name."""
    found: list[tuple[str, Callable[[], Any]]] = []
    for name, dataset in pipeline.datasets.items():
        if not dataset.declared and dataset.kind != "sink":
            found.append((name, dataset.func))
        found.extend((flow.name, flow.func) for flow in dataset.flows)
    return found
