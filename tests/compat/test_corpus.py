"""The documented examples corpus: pyspark's Declarative Pipelines guide and ``spark-pipelines
init`` template, and DLT's Python and SQL reference examples, each in its own folder under
``corpus/``, in the forms the page documents and written for this suite (a comment names the
page: the pages' own text is not copied), run by lakefeed on a temporary
lakehouse and compared with the documented or an independently computed result.

What a page leaves to its reader's workspace is supplied here, never edited in the example:
its input tables (``samples.nyctaxi.trips`` and the like: Spark catalog tables of the test
session, their three-part names mapped to one part because a local session has one catalog)
and its absolute paths (mapped into ``tmp_path``). :data:`COVERS` says which entries of the
compatibility tables (:mod:`lakefeed.compat.features`) each example exercises.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest
from deltalake import DeltaTable

import lakefeed as lf
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.graph import PipelineError
from tests.pipeline.support import table

pytestmark = pytest.mark.compat  # format("delta"), format("cloudFiles"), spark.table(name)

CORPUS = Path(__file__).parent / "corpus"


def copy_example(name: str, tmp_path: Path, replace: Mapping[str, str]) -> Path:
    """The example's folder copied to ``tmp_path``, the workspace names in ``replace``
    mapped to the test's."""
    project = tmp_path / name
    shutil.copytree(CORPUS / name, project)
    for file in project.rglob("*"):
        if file.is_file():
            text = file.read_text()
            for old, new in replace.items():
                text = text.replace(old, new)
            file.write_text(text)
    return project


def catalog_table(spark, name: str, rows: list[tuple], schema: str) -> None:
    """An input table in the session's catalog (Parquet, so a stream can read it too)."""
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.createDataFrame(rows, schema).write.format("parquet").saveAsTable(name)


def rows(lakehouse: Lakehouse, name: str, columns: list[str]) -> list[tuple]:
    data = table(lakehouse, name).select(columns).to_pylist()
    return ordered(tuple(row.values()) for row in data)


def ordered(items: Iterable[tuple]) -> list[tuple]:
    """Rows in one order, NULLs included."""
    return sorted(items, key=repr)


TRIPS = [(1.5, 7.0, "10001"), (3.0, 12.5, "10002"), (0.8, 5.0, "10001")]
TPCH = {
    "tpch_region": ([(0, "AMERICA"), (1, "MIDDLE EAST")], "r_regionkey INT, r_name STRING"),
    "tpch_nation": (
        [(0, "BRAZIL", 0), (1, "EGYPT", 1), (2, "CANADA", 0)],
        "n_nationkey INT, n_name STRING, n_regionkey INT",
    ),
    "tpch_customer": (
        [(1, "Ann", 0, "555-1"), (2, "Bob", 1, "555-2"), (3, "Cy", 2, "555-3")],
        "c_custkey INT, c_name STRING, c_nationkey INT, c_phone STRING",
    ),
    "tpch_orders": (
        [(10, 1, "F", 100.0, "2026-01-01"), (11, 2, "O", 50.0, "2026-01-02"),
         (12, 3, "F", 75.0, "2026-01-03")],
        "o_orderkey INT, o_custkey INT, o_orderstatus STRING, o_totalprice DOUBLE, "
        "o_orderdate STRING",
    ),
}  # fmt: skip


@pytest.fixture
def session_conf(spark) -> Iterator[None]:
    """A run sets its spec's ``configuration`` on the session; the shared session gets its
    shuffle partitions back."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", before)


def customer_inputs(spark) -> None:
    catalog_table(spark, "customers_us_west", [(1, "Ann")], "id INT, name STRING")
    catalog_table(spark, "customers_us_east", [(2, "Bob"), (3, "Cy")], "id INT, name STRING")


@pytest.mark.usefixtures("session_conf")
def test_sdp_guide_python(spark, tmp_path: Path) -> None:
    """Every Python example of the guide that compiles, as one project with the guide's spec
    (``catalog``/``database``, ``configuration``, a ``libraries`` glob, ``storage``)."""
    catalog_table(spark, "nyctaxi_trips", TRIPS, "trip_distance DOUBLE, fare DOUBLE, zip STRING")
    customer_inputs(spark)
    orders = tmp_path / "sales_orders"
    orders.mkdir()
    (orders / "part0.json").write_text('{"order_number": 1}\n{"order_number": 2}\n')
    project = copy_example(
        "sdp_guide_python",
        tmp_path,
        {
            "file:///absolute/path/to/storage/dir": f"file://{tmp_path / 'storage'}",
            "/datasets/retail-org/sales_orders": str(orders),
            "samples.nyctaxi.trips": "nyctaxi_trips",
        },
    )
    result = lf.run(project, spark=spark)
    assert result.ok, result
    lakehouse = Lakehouse.at(tmp_path / "storage")
    trips = [(d, f, z) for d, f, z in TRIPS]
    columns = ["trip_distance", "fare", "zip"]
    for name in ("rides_mv", "rides_copy", "rides_st"):
        assert rows(lakehouse, name, columns) == sorted(trips), name
    assert rows(lakehouse, "orders_mv", ["order_number"]) == [(1,), (2,)]
    assert rows(lakehouse, "all_customers", ["id", "name"]) == [(1, "Ann"), (2, "Bob"), (3, "Cy")]
    assert not lakehouse.table_path("rides_tv").exists()  # a temporary view is not stored
    assert spark.conf.get("spark.sql.shuffle.partitions") == "1000"  # the spec's configuration


def test_sdp_guide_for_loop_is_refused_as_by_sdp(spark, tmp_path: Path) -> None:
    """The guide's for-loop example declares ``@dp.table`` (a streaming table) over batch
    reads: ``spark-pipelines`` refuses it (``INVALID_FLOW_QUERY_TYPE.
    BATCH_RELATION_FOR_STREAMING_TABLE``), and so does lakefeed, before anything is written;
    the module-level ``collect()`` of the region names runs on the session."""
    for name, (data, schema) in TPCH.items():
        catalog_table(spark, name, data, schema)
    project = copy_example("sdp_guide_for_loop", tmp_path, {"samples.tpch.": "tpch_"})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    with pytest.raises(PipelineError) as refused:
        lf.run(project, lakehouse=lakehouse, spark=spark)
    problems = refused.value.problems
    assert sorted(p.split("'")[1] for p in problems) == [
        "america_customer_orders", "middle_east_customer_orders"
    ]  # fmt: skip
    assert all("returned a batch DataFrame" in p and "materialized_view" in p for p in problems)
    assert str(refused.value).startswith("[LAKEFEED:PIPELINE]")
    assert lakehouse.table_names() == []


def test_sdp_guide_sql(spark, tmp_path: Path) -> None:
    """Every SQL example of the guide, as one folder of ``.sql`` files; their inputs are tables
    of the session's catalog, read in batch or as a stream (``STREAM x``, ``STREAM(x)``)."""
    catalog_table(spark, "nyctaxi_trips", TRIPS, "trip_distance DOUBLE, fare DOUBLE, zip STRING")
    customer_inputs(spark)
    catalog_table(
        spark,
        "orders_source",
        [(1, 100, "1767225600"), (1, 101, "1767312000"), (2, 102, "1767225600")],
        "customer_id INT, order_number INT, order_datetime STRING",
    )
    catalog_table(
        spark, "customers_source", [(1, "CA"), (2, "NY")], "customer_id INT, state STRING"
    )
    project = copy_example("sdp_guide_sql", tmp_path, {"samples.nyctaxi.trips": "nyctaxi_trips"})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    result = lf.run(project, lakehouse=lakehouse, spark=spark)
    assert result.ok, result
    columns = ["trip_distance", "fare", "zip"]
    for name in ("rides_mv", "rides_st"):
        assert rows(lakehouse, name, columns) == sorted(TRIPS), name
    assert rows(lakehouse, "all_customers", ["id", "name"]) == [(1, "Ann"), (2, "Bob"), (3, "Cy")]
    # 1767225600 is 2026-01-01 00:00:00 UTC; the session's time zone decides the date
    day = spark.sql("SELECT date(timestamp(int('1767225600'))) d").first().d
    next_day = spark.sql("SELECT date(timestamp(int('1767312000'))) d").first().d
    columns = ["state", "order_date", "order_count"]
    assert rows(lakehouse, "orders_per_state_and_day", columns) == (
        sorted([("CA", day, 1), ("CA", next_day, 1), ("NY", day, 1)])
    )
    assert not lakehouse.table_path("rides_tv").exists()


ORDERS = [
    {"order_id": 1, "customer": "ann", "amount": 120.0},
    {"order_id": 2, "customer": "bob", "amount": 30.0},
    {"order_id": None, "customer": "bob", "amount": 10.0},  # dropped: valid_id
    {"order_id": 4, "customer": None, "amount": 50.0},  # kept, counted: has_customer
    {"order_id": 5, "customer": "ann", "amount": -1.0},  # dropped: valid_amount
]
BACKFILL = [{"order_id": 0, "customer": "old", "amount": 7.0}]


def _json_lines(folder: Path, name: str, records: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_dlt_python_reference(spark, tmp_path: Path) -> None:
    """Tables, materialized views and views; Auto Loader; ``expect_all*`` with dicts;
    ``append_flow`` with ``once=True``; a Delta sink and a ``foreach_batch_sink``; parameters
    through ``spark.conf.get``. Each table is compared with what the rules compute."""
    source, backfill = tmp_path / "landing", tmp_path / "backfill"
    _json_lines(source, "orders.json", ORDERS)
    _json_lines(backfill, "old.json", BACKFILL)
    sink, batches = tmp_path / "sink", tmp_path / "batches"
    conf = {
        "mypipeline.source_dir": str(source),
        "mypipeline.backfill_dir": str(backfill),
        "mypipeline.sink_path": str(sink),
        "mypipeline.batches_path": str(batches),
    }
    lakehouse = Lakehouse.at(tmp_path / "lh")
    result = lf.run(CORPUS / "dlt_python", lakehouse=lakehouse, conf=conf, spark=spark)
    assert result.ok, result
    valid = [r for r in ORDERS if r["order_id"] is not None and r["amount"] > 0]
    clean = ordered((r["order_id"], r["customer"], r["amount"]) for r in valid)
    columns = ["order_id", "customer", "amount"]
    assert rows(lakehouse, "orders_raw", ["order_id"]) == ordered((r["order_id"],) for r in ORDERS)
    assert rows(lakehouse, "orders_clean", columns) == clean
    assert len(table(lakehouse, "orders_clean_quarantine")) == len(ORDERS) - len(valid)
    totals: dict = {}
    for _, customer, amount in clean:
        totals[customer] = totals.get(customer, 0) + amount
    assert rows(lakehouse, "customer_totals", ["customer", "total"]) == ordered(totals.items())
    assert rows(lakehouse, "large_order_count", ["count"]) == [(1,)]
    counts = [(c, sum(1 for _, other, _ in clean if other == c)) for c in {c for _, c, _ in clean}]
    assert rows(lakehouse, "customers", ["customer", "count"]) == ordered(counts)
    customers = DeltaTable(str(lakehouse.table_path("customers"))).metadata()
    assert customers.partition_columns == ["customer"]
    assert customers.description == "Customers with valid orders"
    backfilled = [(r["order_id"], r["customer"], r["amount"]) for r in BACKFILL]
    assert rows(lakehouse, "all_orders", columns) == ordered(clean + backfilled)
    delivered = DeltaTable(str(sink)).to_pyarrow_table().select(columns).to_pylist()
    assert ordered(tuple(r.values()) for r in delivered) == clean
    each = DeltaTable(str(batches)).to_pyarrow_table().select(columns).to_pylist()
    assert ordered(tuple(r.values()) for r in each) == clean
    assert not lakehouse.table_path("large_orders").exists()  # a view is not stored
    again = lf.run(CORPUS / "dlt_python", lakehouse=lakehouse, conf=conf, spark=spark)
    assert again.ok and len(table(lakehouse, "all_orders")) == len(clean) + 1  # once: once


SNAPSHOTS = [
    [{"key": 1, "value": "a"}, {"key": 2, "value": "b"}],
    [{"key": 1, "value": "a2"}, {"key": 3, "value": "c"}],
]


def test_dlt_auto_cdc_from_snapshot(spark, tmp_path: Path) -> None:
    """Both documented ways: a view snapshotted on each update (SCD1: the target equals it),
    and a function giving versioned snapshots (SCD2: a row per version a key's value held)."""
    snapshots = tmp_path / "snapshots"
    for version, snapshot in enumerate(SNAPSHOTS, start=1):
        _json_lines(snapshots, f"snapshot_{version}.json", snapshot)
    catalog_table(
        spark, "mycatalog_myschema_mytable", [(1, "x"), (2, "y")], "key INT, value STRING"
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    conf = {"mypipeline.snapshot_dir": str(snapshots)}
    result = lf.run(CORPUS / "dlt_auto_cdc_snapshot", lakehouse=lakehouse, conf=conf, spark=spark)
    assert result.ok, result
    assert rows(lakehouse, "target_periodic", ["key", "value"]) == [(1, "x"), (2, "y")]
    history = rows(lakehouse, "target_historical", ["key", "value", "__START_AT", "__END_AT"])
    assert history == ordered(
        [(1, "a", 1, 2), (1, "a2", 2, None), (2, "b", 1, 2), (3, "c", 2, None)]
    )


def test_sdp_guide_kafka(spark, broker, tmp_path: Path) -> None:
    """``format("kafka")`` with Spark's options: without Spark's Kafka jar, lakefeed's Kafka
    source reads it. As Spark's, a new stream starts at the latest offsets: the first run
    reads nothing already in the topic, the next one what came since."""
    topic = broker.create_topic()
    broker.produce(topic, ["before"])
    project = copy_example(
        "sdp_guide_kafka",
        tmp_path,
        {"localhost:9092": broker.bootstrap, '"subscribe", "orders"': f'"subscribe", "{topic}"'},
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    assert lf.run(project, lakehouse=lakehouse, spark=spark).ok
    assert len(table(lakehouse, "raw_orders")) == 0
    broker.produce(topic, ["o1", "o2"])
    assert lf.run(project, lakehouse=lakehouse, spark=spark).ok
    values = [bytes(v).decode() for v in table(lakehouse, "raw_orders")["value"].to_pylist()]
    assert sorted(values) == ["o1", "o2"]
    assert table(lakehouse, "raw_orders")["topic"].to_pylist() == [topic, topic]


def test_dlt_sql_reference(spark, tmp_path: Path) -> None:
    """Streaming tables with ``CONSTRAINT ... EXPECT`` (drop and warn), a materialized view,
    append flows (``INSERT INTO`` and ``INSERT INTO ONCE``) and ``APPLY CHANGES INTO`` SCD2 on
    DLT's documented users rows, which give DLT's documented SCD2 table."""
    from tests.compat.test_session_first import SCD2, USERS

    records = [tuple(r.values()) for r in ORDERS]
    schema = "order_id BIGINT, customer STRING, amount DOUBLE"
    catalog_table(spark, "orders_source", records, schema)
    catalog_table(spark, "old_orders", [tuple(r.values()) for r in BACKFILL], schema)
    catalog_table(
        spark,
        "users_source",
        USERS,
        "userId BIGINT, name STRING, city STRING, operation STRING, sequenceNum BIGINT",
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    result = lf.run(CORPUS / "dlt_sql", lakehouse=lakehouse, spark=spark)
    assert result.ok, result
    valid = [r for r in records if r[0] is not None and r[2] > 0]
    columns = ["order_id", "customer", "amount"]
    assert rows(lakehouse, "orders_bronze", columns) == ordered(records)
    assert rows(lakehouse, "orders_silver", columns) == ordered(valid)
    assert len(table(lakehouse, "orders_silver_quarantine")) == len(records) - len(valid)
    totals: dict = {}
    for _, customer, amount in valid:
        totals[customer] = totals.get(customer, 0) + amount
    assert rows(lakehouse, "customer_totals", ["customer", "total"]) == ordered(totals.items())
    backfilled = [(r["order_id"], r["amount"]) for r in BACKFILL]
    assert rows(lakehouse, "all_orders", ["order_id", "amount"]) == ordered(
        [(o, a) for o, _, a in valid] + backfilled
    )
    scd2 = ["userId", "name", "city", "__START_AT", "__END_AT"]
    assert rows(lakehouse, "target_scd2", scd2) == ordered(SCD2)
