"""Streams into PostgreSQL: an aggregate in update mode, upserted per batch."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import functions as F

import lakefeed as lf
from lakefeed.connectors import delta
from lakefeed.connectors import postgres as pg
from lakefeed.core.errors import code_of
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.results import RunResult


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


def test_a_checkpoint_behind_the_table_is_refused_a_retried_batch_skipped(
    spark,  # noqa: ANN001
    postgres,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE clicks (id bigint)")  # append-only: a skip or a twin shows
    source, checkpoint, backup = str(tmp_path / "src"), tmp_path / "cp", tmp_path / "backup"
    target = pg.PostgresTarget(url, "clicks")

    def land(*ids: int) -> None:
        write_deltalake(source, pa.table({"id": pa.array(ids, pa.int64())}), mode="append")

    def run() -> Exception | None:
        frame = delta.read_stream(spark, source)
        query = pg.write_stream(frame, target, checkpoint, trigger={"availableNow": True})
        with contextlib.suppress(Exception):  # reported by query.exception()
            query.awaitTermination(300)
        return query.exception()

    def ids() -> list[int]:
        with psycopg.connect(url) as conn:
            return [r[0] for r in conn.execute("SELECT id FROM clicks ORDER BY id").fetchall()]

    land(1, 2, 3)
    assert run() is None  # batch 0
    shutil.copytree(checkpoint, backup)
    land(4, 5)
    assert run() is None  # batch 1
    # Its last batch deleted "to retry it", nothing new landed: planned again over the same
    # offsets, a replay, skipped.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for folder in ("offsets", "commits"):
        for name in (str(last), f".{last}.crc"):
            (checkpoint / folder / name).unlink(missing_ok=True)
    assert run() is None
    assert ids() == [1, 2, 3, 4, 5]
    # The backup put back while the source grew: its batch 1 covers other offsets than the
    # batch 1 the table holds. Refused before writing, never skipped with rows 4 to 7.
    shutil.rmtree(checkpoint)
    shutil.copytree(backup, checkpoint)
    land(6, 7)
    assert code_of(str(run())) == "CHECKPOINT_BEHIND_TABLE"
    assert ids() == [1, 2, 3, 4, 5]


PIPELINE = """
import lakefeed as lf

lf.create_sink("export", "postgres", {"url": lf.config("t.url"), "dbtable": "clicks"})

@lf.append_flow(target="export")
def to_export():
    return lf.read_files(lf.config("t.landing"), "json", schema="id BIGINT").drop("_metadata")
"""


def test_a_pipelines_checkpoints_restored_from_a_backup_are_refused(
    spark,  # noqa: ANN001
    postgres,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    """As an operator would: run, back up ``checkpoints/``, run more, put the backup back,
    land more, run: refused before writing, never "0 rows written"."""
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE clicks (id bigint)")
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "pipeline.py").write_text(PIPELINE)
    lakehouse = Lakehouse.at(tmp_path / "lh")
    landing = tmp_path / "landing"
    landing.mkdir()
    conf = {"t.url": url, "t.landing": str(landing)}

    def land(*ids: int) -> None:
        for n in ids:
            (landing / f"{n:02d}.json").write_text(f'{{"id": {n}}}\n')

    def run() -> RunResult:
        return lf.run(flows, lakehouse=lakehouse, conf=conf, spark=spark, mode="available-now")

    def ids() -> list[int]:
        with psycopg.connect(url) as conn:
            return [r[0] for r in conn.execute("SELECT id FROM clicks ORDER BY id").fetchall()]

    checkpoints, backup = lakehouse.root / "checkpoints", tmp_path / "backup"
    land(1, 2, 3)
    assert run().ok
    shutil.copytree(checkpoints, backup)
    land(4, 5)
    assert run().ok
    shutil.rmtree(checkpoints)
    shutil.copytree(backup, checkpoints)
    land(6, 7)
    with pytest.raises(PipelineError, match="CHECKPOINT_BEHIND_TABLE"):
        run()
    assert ids() == [1, 2, 3, 4, 5]
