"""``@lf.table(keys=[...])``: update mode into Delta, a MERGE per micro-batch, exactly once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

import lakefeed as lf
from lakefeed.core.lakehouse import Lakehouse
from tests.pipeline.support import load, table, write

PIPELINE = """
import lakefeed as lf
from pyspark.sql import functions as F

@lf.table(keys=["page"])
def page_views():
    return (
        lf.source("delta", lf.config("src"), maxFilesPerTrigger="1")
        .groupBy("page")
        .agg(F.count("*").alias("views"), F.max("at").alias("last_at"))
    )
"""


def _append(src: Path, pages: list[str], at: int) -> None:
    rows = pa.table({"page": pages, "at": pa.array([at] * len(pages), pa.int64())})
    write_deltalake(str(src), rows, mode="append")


def test_an_aggregate_with_keys_is_upserted_batch_by_batch(spark, tmp_path: Path) -> None:
    src = tmp_path / "clicks"
    _append(src, ["/", "/cart"], 1)
    _append(src, ["/", "/pay"], 2)
    folder = write(tmp_path / "p", {"views.py": PIPELINE})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    conf = {"src": str(src)}
    report = lf.validate(load([folder], conf), lakehouse=lakehouse, spark=spark)
    assert report.ok, report.problems
    assert report.flows[0].output_mode == "update"
    assert lf.run(load([folder], conf), lakehouse=lakehouse, spark=spark).ok
    _append(src, ["/cart", "/cart"], 3)
    assert lf.run(load([folder], conf), lakehouse=lakehouse, spark=spark).ok

    rows = {
        r["page"]: (r["views"], r["last_at"]) for r in table(lakehouse, "page_views").to_pylist()
    }
    assert rows == {"/": (2, 2), "/cart": (3, 3), "/pay": (1, 2)}  # one row per key, upserted
    check = lf.verify(load([folder], conf), lakehouse=lakehouse, spark=spark, run_first=False)
    assert check.ok, check.tables


def test_update_without_keys_says_to_declare_them(spark, tmp_path: Path) -> None:
    text = PIPELINE.replace('keys=["page"]', 'output_mode="update"')
    folder = write(tmp_path / "p", {"views.py": text})
    _append(tmp_path / "clicks", ["/"], 1)
    pipeline = load([folder], {"src": str(tmp_path / "clicks")})
    report = lf.validate(pipeline, lakehouse=tmp_path / "lh", spark=spark)
    assert any("@lf.table(keys=[...])" in p for p in report.problems), report.problems
