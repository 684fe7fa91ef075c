"""PostgreSQL as an exactly-once streaming sink: upserts (or appends) per micro-batch.

The seeds' "foreachBatch + JDBC" sink is exactly-once only if a replayed batch changes nothing.
Here each micro-batch is one PostgreSQL transaction: the rows are COPYed into a temporary staging
table, moved with ``INSERT … ON CONFLICT (keys) DO UPDATE`` (or a plain ``INSERT`` without keys),
and the batch id is recorded for the query in ``lakefeed_sink_commits`` — in the same
transaction. A batch Spark replays after a crash finds its id recorded and is skipped, so the
target sees every batch once, whatever was killed when.

``from lakefeed.connectors import postgres``::

    target = postgres.PostgresTarget("postgresql://app@db:5432/shop", "public.customers", ["id"])
    query = postgres.write_stream(frame, target, checkpoint="/chk/customers")

It also reads: ``spark.read.format("lakefeed_postgres")`` (:mod:`.source`) gives a table or
query as a batch DataFrame, e.g. reference data for a stream–static join.

Needs ``psycopg`` 3 (``pip install 'lakefeed[postgres]'``); nothing on Spark's classpath.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from lakefeed.connectors.base import Connector
from lakefeed.connectors.postgres.adapters import foreach_batch, write_stream
from lakefeed.connectors.postgres.pipeline_sink import PostgresSink
from lakefeed.connectors.postgres.sink import PostgresTarget, check_target, write_batch
from lakefeed.core.redact import redact_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "CONNECTOR",
    "PostgresTarget",
    "check_target",
    "foreach_batch",
    "write_batch",
    "write_stream",
]


def register(spark: SparkSession) -> bool:
    """Register the ``lakefeed_postgres`` batch source on ``spark``."""
    # pyspark's data sources: on registration only.
    from lakefeed.connectors.postgres.source import PostgresDataSource

    spark.dataSource.register(PostgresDataSource)
    return True


def describe(options: Mapping[str, str]) -> str:
    given = {k.lower(): v for k, v in options.items()}
    what = given.get("dbtable") or "query"
    return f"PostgreSQL {redact_text(given.get('url', ''))} {what}".replace("  ", " ")


CONNECTOR = Connector(
    name="postgres",
    formats=("lakefeed_postgres",),
    aliases=("postgres", "postgresql"),
    register=register,
    describe=describe,
    sink=PostgresSink(),
)
