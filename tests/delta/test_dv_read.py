"""Spark's scan of files with deletion vectors (:mod:`lakefeed.delta.spark_read`): the deleted
rows are anti-joined on one long key, Spark's hash of the file's name high and the row's
position low. These tests pin that the key never deletes a row of another file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import from_arrow_schema

from lakefeed.delta import dv, spark_read
from lakefeed.delta.errors import DeletionVectorError
from lakefeed.delta.log import DataFile

SAME_HASH = ("dv-9897.parquet", "dv-35071.parquet")
"""Two file names whose Spark ``hash`` (Murmur3, seed 42) is the same: -1986221636."""
SCHEMA = pa.schema([("id", pa.int64())])


def _files(root: Path, deleted: dict[str, list[int]], rows: int = 5) -> list[DataFile]:
    """One Parquet file of ids ``start .. start + rows`` per name, with its deleted positions."""
    files = []
    for number, (name, positions) in enumerate(deleted.items()):
        ids = pa.table({"id": np.arange(number * 100, number * 100 + rows)}, schema=SCHEMA)
        pq.write_table(ids, root / name)
        deletes = dv.Positions.of(np.array(positions)) if positions else None
        files.append(DataFile(name, (root / name).stat().st_size, {}, deletes=deletes))
    return files


def _ids(spark, root: Path, files: list[DataFile]) -> list[int]:  # noqa: ANN001
    schema = from_arrow_schema(SCHEMA)
    frame = spark_read.files_frame(spark, str(root), files, schema)
    assert frame is not None
    return sorted(row.id for row in frame.collect())


def test_files_whose_names_hash_alike_keep_each_others_rows(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """The same positions deleted in two files whose names' hashes collide: were they keyed in
    one scan, each file would lose the other's rows too."""
    files = _files(tmp_path, {SAME_HASH[0]: [0, 3], SAME_HASH[1]: [1], "plain.parquet": []})
    hashes = spark_read._name_hashes(spark, str(tmp_path), files[:2])
    assert hashes[SAME_HASH[0]] == hashes[SAME_HASH[1]]
    assert _ids(spark, tmp_path, files) == [1, 2, 4, 100, 102, 103, 104, 200, 201, 202, 203, 204]


def test_deleted_rows_join_on_one_long_key(spark, tmp_path: Path) -> None:  # noqa: ANN001
    """Many files with vectors in one scan; the anti-join's key is one long, not a string."""
    names = {f"part {n}.parquet": [n % 5, 4] for n in range(6)}  # a space: Hadoop encodes it
    files = _files(tmp_path, names)
    expected = [n * 100 + i for n in range(6) for i in range(4) if i != n % 5]
    assert _ids(spark, tmp_path, files) == expected
    schema = from_arrow_schema(SCHEMA)
    frame = spark_read.files_frame(spark, str(tmp_path), files, schema)
    assert frame is not None
    plan = frame._jdf.queryExecution().optimizedPlan().toString()
    join = next(line for line in plan.splitlines() if "Join LeftAnti" in line)
    assert join.count(" = ") == 1 and "__lakefeed_static_deleted" in join, join


def test_a_vector_past_32_bit_positions_is_refused(spark, tmp_path: Path) -> None:  # noqa: ANN001
    files = _files(tmp_path, {"big.parquet": [1, 1 << 32]})
    schema = from_arrow_schema(SCHEMA)
    with pytest.raises(DeletionVectorError, match="fewer than 2\\^32 rows"):
        spark_read.files_frame(spark, str(tmp_path), files, schema)
