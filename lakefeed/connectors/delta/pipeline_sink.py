"""A Delta table as a pipeline sink (``lf.create_sink("out", "delta", {"path": ...})``).

Written by the explicit Delta adapter, so each batch commits with the flow's query id and
batch id as its ``txn``: a batch Spark replays after a crash finds its txn and is skipped.
The table is named by ``path``, or by ``tableName`` in the lakehouse (``tables/<name>``, where
``DeltaTable.forName`` finds it) outside the pipeline's own datasets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakefeed.connectors.base import ConnectorSink, QueryStart
from lakefeed.core.errors import ConfigError
from lakefeed.core.options import Options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from lakefeed.core.lakehouse import Lakehouse

_WHERE = {"path", "tablename"}
"""The options that place the table; the others go to the writer."""


class DeltaSink(ConnectorSink):
    """Appends to a Delta table, exactly once per batch (the flow's ``txn``)."""

    def describe(self, options: Mapping[str, str]) -> str:
        opts = Options(options)
        return f"Delta table {opts.get('path') or opts.get('tableName')}"

    def check(self, options: Mapping[str, str]) -> None:
        opts = Options(options)
        if bool(opts.get("path")) == bool(opts.get("tableName")):
            raise ConfigError(
                "a Delta sink needs exactly one of the options path or tableName",
                fix='e.g. {"path": "/data/exports/alerts"} or {"tableName": "alerts_export"}',
            )

    def table(self, options: Mapping[str, str]) -> str | None:
        return Options(options).get("tableName") or None

    def delta_root(self, options: Mapping[str, str], lakehouse: Lakehouse) -> str | None:
        return table_path(options, lakehouse)

    def write_stream(
        self, frame: DataFrame, options: Mapping[str, str], start: QueryStart, lakehouse: Lakehouse
    ) -> StreamingQuery:
        # pyspark, delta-rs: the connector's declaration imports this module.
        from lakefeed.connectors.delta.adapters import write_stream

        rest: dict[str, Any] = {k: v for k, v in options.items() if k.lower() not in _WHERE}
        path = table_path(options, lakehouse)
        return write_stream(frame, path, start.checkpoint, **start.settings(), **rest)


def table_path(options: Mapping[str, str], lakehouse: Lakehouse) -> str:
    """The sink's table: its ``path``, or ``tableName`` (its last part) in the lakehouse."""
    opts = Options(options)
    path = opts.get("path")
    if path:
        return str(path)
    return str(lakehouse.table_path(str(opts.get("tableName")).split(".")[-1]))
