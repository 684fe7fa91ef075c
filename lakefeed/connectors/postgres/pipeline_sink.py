"""A PostgreSQL table as a pipeline sink (``lf.create_sink("shop", "postgres", {"url": ...,
"dbtable": ..., "keys": "id"})``): upserts on ``keys`` (appends without), exactly once per
batch by the commit table (see :mod:`lakefeed.connectors.postgres`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakefeed.connectors.base import ConnectorSink, QueryStart
from lakefeed.connectors.postgres.adapters import write_stream
from lakefeed.connectors.postgres.sink import PostgresTarget, check_name
from lakefeed.core.errors import ConfigError
from lakefeed.core.options import Options
from lakefeed.core.redact import redact_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType

    from lakefeed.core.lakehouse import Lakehouse


class PostgresSink(ConnectorSink):
    """Each batch one transaction: COPY, upsert (or insert), record the batch id."""

    def describe(self, options: Mapping[str, str]) -> str:
        opts = Options(options)
        return f"PostgreSQL {redact_text(opts.get('url') or '')} table {opts.get('dbtable')}"

    def check(self, options: Mapping[str, str]) -> None:
        opts = Options(options)
        table = opts.get("dbtable")
        if not opts.get("url") or not table:
            raise ConfigError(
                "a PostgreSQL sink needs the options url and dbtable (keys: upsert on them)",
                fix='e.g. {"url": "postgresql://app@db/shop", "dbtable": "public.customers", '
                '"keys": "id"}',
            )
        check_name(table, "table", parts=2)
        for key in self.keys(options):
            check_name(key, "key column")

    def keys(self, options: Mapping[str, str]) -> list[str]:
        return Options(options).names_list("keys")

    def frame_problems(self, options: Mapping[str, str], schema: StructType) -> None:
        columns = schema.fieldNames()
        missing = [k for k in self.keys(options) if k not in columns]
        if missing:
            raise ConfigError(
                f"key(s) {missing} are not in the flow's columns {columns}",
                fix="select the key columns in the flow, or fix the keys option",
            )

    def write_stream(
        self, frame: DataFrame, options: Mapping[str, str], start: QueryStart, lakehouse: Lakehouse
    ) -> StreamingQuery:
        opts = Options(options)
        target = PostgresTarget(opts["url"], opts["dbtable"], self.keys(options))
        return write_stream(frame, target, start.checkpoint, **start.settings())
