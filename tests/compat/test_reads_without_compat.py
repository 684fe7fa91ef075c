"""A pipeline's reads by name work on a session without the compatibility layer (issue 30):
``spark.read.table``, ``spark.readStream.table`` and ``spark.table`` (``LIVE.x`` too) in DLT
and SDP files read the pipeline's datasets, put in by the files' surface alone."""

from __future__ import annotations

from pathlib import Path

import lakefeed as lf
from lakefeed.compat import patches
from lakefeed.core.lakehouse import Lakehouse
from tests.pipeline.support import table, write

DLT = """
import dlt


@dlt.table
def base():
    return spark.range(5)


@dlt.table
def by_reader():
    return spark.read.table("base").where("id > 2")


@dlt.table
def by_session():
    return spark.table("LIVE.base").where("id < 2")
"""


def test_reads_by_name_need_no_compat_layer(spark, tmp_path: Path) -> None:
    assert patches.installed() == []  # the suite's session: compat=False
    folder = write(tmp_path / "p", {"p.py": DLT})
    result = lf.run(folder, lakehouse=tmp_path / "lh", spark=spark, mode="available-now")
    assert result.ok, result
    lakehouse = Lakehouse.at(tmp_path / "lh")
    assert sorted(table(lakehouse, "by_reader")["id"].to_pylist()) == [3, 4]
    assert sorted(table(lakehouse, "by_session")["id"].to_pylist()) == [0, 1]
