"""Routes ``spark.readStream/read.format(X).load()`` of lakefeed's formats to Spark's readers.

The user's code stays as it is: ``load()`` first asks the format's planner, which returns a
DataFrame that Spark's own readers read (a stream through ``PlannedSource``, see
:mod:`lakefeed.jvm.bridge`; a batch read directly), or None for the Python data source as
registered. Options are recorded as they are set because Spark's reader does not hand them back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamReader

from lakefeed.connectors.patching import (
    record_option,
    record_options,
    recorded,
    remember,
    text,
    wrap,
)

Planned = Callable[[SparkSession, dict[str, str], Any], DataFrame | None]
"""(session, options, the schema the user fixed or None) -> a planned stream, or None."""
_ROUTES: dict[tuple[type, str], Planned] = {}


def route(format_name: str, planned: Planned, batch: bool = False) -> None:
    """``readStream`` (or with ``batch``, ``read``) ``.format(format_name).load()`` asks
    ``planned`` first (None: the Python data source)."""
    reader = DataFrameReader if batch else DataStreamReader
    _ROUTES[(reader, format_name.lower())] = planned
    wrap(reader, "format", remember("_lakefeed_format"))
    wrap(reader, "option", record_option)
    wrap(reader, "options", record_options)
    wrap(reader, "schema", _remember_schema)
    wrap(reader, "load", _load)


def _remember_schema(original: Callable) -> Callable:
    def schema(self: Any, value: Any) -> Any:
        self._lakefeed_schema = value
        return original(self, value)

    return schema


def _load(original: Callable) -> Callable:
    def load(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        schema: Any = None,
        **options: Any,
    ) -> Any:
        if format is not None:
            self.format(format)
        fmt = (getattr(self, "_lakefeed_format", None) or "").lower()
        planned = _ROUTES.get((type(self), fmt))
        if planned is not None and (path is None or isinstance(path, str)):
            every = {**recorded(self), **{k: text(v) for k, v in options.items()}}
            if path is not None:
                every["path"] = path
            fixed = schema if schema is not None else getattr(self, "_lakefeed_schema", None)
            frame = planned(self._spark, every, fixed)
            if frame is not None:
                return frame
        return original(self, path, None, schema, **options)

    return load
