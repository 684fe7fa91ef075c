"""Streams into PostgreSQL: an aggregate in update mode, upserted per batch."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pyarrow as pa
from deltalake import write_deltalake
from pyspark.sql import functions as F

from lakefeed.connectors import delta
from lakefeed.connectors import postgres as pg


def test_update_mode_aggregate_is_upserted_batch_by_batch(spark, postgres, tmp_path: Path) -> None:  # noqa: ANN001
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE page_counts (page text PRIMARY KEY, views bigint)")
    pages = ["/", "/cart", "/", "/pay", "/", "/cart"]
    for start in range(0, len(pages), 2):  # three commits: batches change some counts
        chunk = pages[start : start + 2]
        write_deltalake(str(tmp_path / "src"), pa.table({"page": chunk}), mode="append")
    counts = (
        delta.read_stream(spark, str(tmp_path / "src"), maxFilesPerTrigger="1")
        .groupBy("page")
        .agg(F.count("*").alias("views"))
    )
    target = pg.PostgresTarget(url, "page_counts", ["page"])
    query = pg.write_stream(
        counts,
        target,
        tmp_path / "cp",
        output_mode="update",
        trigger={"availableNow": True},
    )
    query.awaitTermination(300)
    with psycopg.connect(url) as conn:
        rows = dict(conn.execute("SELECT page, views FROM page_counts").fetchall())
    assert rows == {"/": 3, "/cart": 2, "/pay": 1}
    assert pg.sink.last_batch(target, str(query.id)) == 2  # three batches, each applied once
