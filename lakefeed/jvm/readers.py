"""Routes ``spark.readStream.format(X).load()`` of lakefeed's formats to planned streams.

The user's code stays as it is; when ``PlannedSource`` is available and the reader allows it,
``load()`` returns a stream that the format's Python reader plans and Spark reads (see
:mod:`lakefeed.jvm.bridge`), else the Python data source as registered. Options are recorded
as they are set because Spark's reader does not hand them back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamReader

from lakefeed.connectors.delta.compat import (
    _record_option,
    _record_options,
    _recorded,
    _remember,
    _text,
    _wrap,
)

Planned = Callable[[SparkSession, dict[str, str], Any], DataFrame | None]
"""(session, options, the schema the user fixed or None) -> a planned stream, or None."""
_ROUTES: dict[str, Planned] = {}


def route(format_name: str, planned: Planned) -> None:
    """``readStream.format(format_name).load()`` asks ``planned`` first (None: Python source)."""
    _ROUTES[format_name.lower()] = planned
    _wrap(DataStreamReader, "format", _remember("_lakefeed_format"))
    _wrap(DataStreamReader, "option", _record_option)
    _wrap(DataStreamReader, "options", _record_options)
    _wrap(DataStreamReader, "schema", _remember_schema)
    _wrap(DataStreamReader, "load", _load)


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
        planned = _ROUTES.get((getattr(self, "_lakefeed_format", None) or "").lower())
        if planned is not None:
            every = {**_recorded(self), **{k: _text(v) for k, v in options.items()}}
            if path is not None:
                every["path"] = path
            fixed = schema if schema is not None else getattr(self, "_lakefeed_schema", None)
            frame = planned(self._spark, every, fixed)
            if frame is not None:
                return frame
        return original(self, path, None, schema, **options)

    return load
