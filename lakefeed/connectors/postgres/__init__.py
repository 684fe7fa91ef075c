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

Needs ``psycopg`` 3 (``pip install 'lakefeed[postgres]'``); nothing on Spark's classpath.
"""

from lakefeed.connectors.postgres.adapters import foreach_batch, write_stream
from lakefeed.connectors.postgres.sink import PostgresTarget, check_target, write_batch

__all__ = ["PostgresTarget", "check_target", "foreach_batch", "write_batch", "write_stream"]
