"""A Delta table on the static side of a stream–static join is read at its latest version by
every micro-batch, as on Databricks: a dimension updated while the stream runs is joined by the
next batch (Spark's own Parquet reader and the Python reader alike)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.connectors import delta
from lakefeed.runtime.evaluate import plan_facts
from tests.support.delta import join_across_a_change
from tests.support.delta import rows as delta_rows


def _devices(ids: list[int]) -> pa.Table:
    return pa.table({"device": pa.array(ids, pa.int32())})


@pytest.mark.parametrize("reader", ["spark", "python"])
def test_each_micro_batch_joins_the_dimension_as_it_is_then(
    spark, tmp_path: Path, reader: str
) -> None:
    src, dim, out = (str(tmp_path / n) for n in ("readings", "devices", "enriched"))
    write_deltalake(src, _devices([1, 2]))
    write_deltalake(dim, pa.table({"device": pa.array([1, 2], pa.int32()), "site": ["a", "b"]}))
    sites = delta.read(spark, dim, **{"lakefeed.reader": reader})
    enriched = delta.read_stream(spark, src, maxFilesPerTrigger="1").join(sites, "device")
    facts = plan_facts(enriched)  # what verify and the runner learn of it: no state, a static side
    assert facts.static_join and not facts.stream_join and not facts.stateful

    def change() -> None:  # an UPDATE (remove + add): the old file stays until a vacuum
        DeltaTable(dim).update({"site": "'moved'"}, predicate="device = 1")
        write_deltalake(src, _devices([1]), mode="append")

    join_across_a_change(enriched, out, str(tmp_path / "cp"), change)
    rows = delta_rows(out)
    assert rows == sorted(
        [{"device": 1, "site": "a"}, {"device": 2, "site": "b"}, {"device": 1, "site": "moved"}],
        key=str,
    )
