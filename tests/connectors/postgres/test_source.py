"""``format("lakefeed_postgres")``: reference data read jar-free, fresh for every micro-batch."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakefeed.connectors import delta
from tests.support.delta import join_across_a_change
from tests.support.delta import rows as delta_rows


@pytest.fixture
def url(postgres) -> str:  # noqa: ANN001 - tests.support.postgres.Postgres
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE devices (id int PRIMARY KEY, site text, installed timestamptz, "
            "weight float8, price numeric(8, 2))"
        )
        conn.execute(
            "INSERT INTO devices SELECT i, 'site-' || (i % 3), '2026-01-01T00:00:00Z', i * 1.5, "
            "i + 0.25 FROM generate_series(1, 40) AS i"
        )
    return url


def test_a_table_reads_with_types_and_in_ranges(spark, url: str) -> None:
    whole = spark.read.format("lakefeed_postgres").option("url", url).option("dbtable", "devices")
    frame = whole.load()
    assert frame.schema.simpleString() == (
        "struct<id:int,site:string,installed:timestamp,weight:double,price:string>"
    )
    assert frame.count() == 40
    split = (
        whole.option("partitionColumn", "id")
        .option("lowerBound", 1)
        .option("upperBound", 41)
        .option("numPartitions", 4)
        .load()
    )
    assert split.rdd.getNumPartitions() == 4
    assert sorted(r.id for r in split.collect()) == list(range(1, 41))
    query = (
        spark.read.format("lakefeed_postgres")
        .option("url", url)
        .option("query", "SELECT site, count(*) AS n FROM devices GROUP BY site")
        .load()
    )
    assert {r.site: r.n for r in query.collect()} == {"site-0": 13, "site-1": 14, "site-2": 13}


def test_bad_options_are_refused_with_a_code(spark, url: str) -> None:
    reader = spark.read.format("lakefeed_postgres").option("url", url)
    with pytest.raises(Exception, match="POSTGRES_OPTION"):
        reader.load()
    with pytest.raises(Exception, match="POSTGRES_TARGET"):
        reader.option("dbtable", "devices; DROP TABLE devices").load()


def test_each_micro_batch_joins_the_reference_data_as_it_is_then(
    spark, url: str, tmp_path: Path
) -> None:
    """A stream–static join re-reads PostgreSQL per batch: a moved device shows at once."""
    src, out = tmp_path / "readings", tmp_path / "enriched"
    write_deltalake(str(src), pa.table({"device": pa.array([1, 2], pa.int32())}))
    sites = (
        spark.read.format("lakefeed_postgres")
        .option("url", url)
        .option("query", "SELECT id AS device, site FROM devices")
        .load()
    )
    enriched = delta.read_stream(spark, str(src), maxFilesPerTrigger="1").join(sites, "device")

    def change() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE devices SET site = 'moved' WHERE id = 1")
        write_deltalake(str(src), pa.table({"device": pa.array([1], pa.int32())}), mode="append")

    join_across_a_change(enriched, str(out), str(tmp_path / "cp"), change)
    rows = delta_rows(out)
    assert rows == sorted(
        [
            {"device": 1, "site": "site-1"},
            {"device": 2, "site": "site-2"},
            {"device": 1, "site": "moved"},
        ],
        key=str,
    )
