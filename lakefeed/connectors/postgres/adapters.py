"""Spark adapters for the PostgreSQL sink: a ``foreachBatch`` body and a stream starter.

The batch is collected to the driver as Arrow (one transaction must hold all of it for the
batch to count once) and COPYed from there; size micro-batches with the source's rate limits
(``maxOffsetsPerTrigger``, ``maxFilesPerTrigger``) so a batch fits the driver's memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from lakefeed.connectors.base import start_query
from lakefeed.connectors.postgres.sink import PostgresTarget, check_target, write_batch
from lakefeed.core.logs import get_logger
from lakefeed.spark import offset_log
from lakefeed.spark.foreach_batch import stop_aware

log = get_logger(__name__)


def foreach_batch(
    target: PostgresTarget, checkpoint: str | Path
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function writing each batch to ``target`` exactly once.

    The query's id (from ``checkpoint``, the query's ``checkpointLocation``) is recorded with
    each batch, so two queries may write the same table, each replay-safe on its own.
    """

    def write(batch: DataFrame, batch_id: int) -> None:
        app_id = offset_log.running_query_id(checkpoint)
        offsets = offset_log.fingerprint(checkpoint, batch_id)
        written = write_batch(target, app_id, batch_id, batch.toArrow(), offsets)
        if written is None:
            log.info(
                "batch already in PostgreSQL, skipped",
                extra={"target": target.where, "batch": batch_id},
            )

    return write


def write_stream(
    frame: DataFrame,
    target: PostgresTarget,
    checkpoint: str | Path,
    *,
    output_mode: str = "append",
    query_name: str | None = None,
    trigger: Mapping[str, Any] | None = None,
) -> StreamingQuery:
    """Start streaming ``frame`` into ``target`` (exactly once per batch, by the query id in
    ``checkpoint``); the table and its key index are checked first. ``trigger`` as for
    ``DataStreamWriter.trigger``; ``update`` mode suits upserts of an aggregate's changed rows."""
    check_target(target, frame.columns)
    writer = stop_aware(frame.writeStream, foreach_batch(target, checkpoint))
    return start_query(
        writer, str(checkpoint), output_mode=output_mode, query_name=query_name, trigger=trigger
    )
