"""The documented-examples corpus: pyspark's Declarative Pipelines guide and DLT's Python and
SQL reference pages, each in its own folder under ``corpus/``, written for this suite in the
forms the page documents with the suite's own names and data (a comment names the page; no
page text is copied), run by lakefeed on a temporary lakehouse and compared with results
computed here from the input rows.

What a page leaves to its reader's workspace is supplied here, never edited in the example:
its input tables (``harbour.logistics.arrivals`` and the like: Spark catalog tables of the test
session, their three-part names mapped to one part because a local session has one catalog)
and its absolute paths (mapped into ``tmp_path``). :mod:`lakefeed.compat.features` names the
test here that covers each DLT and SDP entry.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from zoneinfo import ZoneInfo

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


ARRIVALS = [("Aurora", 1200.0, "B1"), ("Kestrel", 300.5, "B2"), ("Tern", 80.0, "B1")]
ARRIVALS_SCHEMA = "vessel STRING, tons DOUBLE, berth STRING"
RETAIL = {
    "retail_ref_countries": ([(1, "NEW ZEALAND"), (2, "CHILE")], "co_id INT, co_name STRING"),
    "retail_ref_cities": ([(10, 1), (11, 2), (12, 1)], "ci_id INT, ci_country INT"),
    "retail_ref_stores": ([(100, 10), (101, 11), (102, 12)], "st_id INT, st_city INT"),
    "retail_ref_sales": (
        [(1, 100, 9.5), (2, 101, 20.0), (3, 102, 4.25)],
        "sale_id INT, store_id INT, amount DOUBLE",
    ),
}


PIER_A, PIER_B = [(1, "Aurora")], [(2, "Kestrel"), (3, "Tern")]


def vessel_inputs(spark) -> None:
    catalog_table(spark, "vessels_pier_a", PIER_A, "id INT, name STRING")
    catalog_table(spark, "vessels_pier_b", PIER_B, "id INT, name STRING")
    catalog_table(spark, "harbour_logistics_arrivals", ARRIVALS, ARRIVALS_SCHEMA)


def test_sdp_guide_python(spark, tmp_path: Path) -> None:
    """The guide's Python forms, as one project with a spec of the guide's fields
    (``catalog``/``database``, ``configuration``, a ``libraries`` glob, ``storage``)."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    vessel_inputs(spark)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "part0.json").write_text('{"manifest": 7}\n{"manifest": 9}\n')
    project = copy_example(
        "sdp_guide_python",
        tmp_path,
        {
            "file:///placeholder/harbour/storage": f"file://{tmp_path / 'storage'}",
            "/landing/harbour/manifests": str(manifests),
            "harbour.logistics.arrivals": "harbour_logistics_arrivals",
        },
    )
    result = lf.run(project, spark=spark)
    assert result.ok, result
    lakehouse = Lakehouse.at(tmp_path / "storage")
    columns = ["vessel", "tons", "berth"]
    for name in ("arrivals_mv", "arrivals_copy", "arrivals_st"):
        assert rows(lakehouse, name, columns) == ordered(ARRIVALS), name
    assert rows(lakehouse, "manifests_mv", ["manifest"]) == [(7,), (9,)]
    assert rows(lakehouse, "all_vessels", ["id", "name"]) == ordered(PIER_A + PIER_B)
    assert not lakehouse.table_path("arrivals_tv").exists()  # a temporary view is not stored
    # the spec's configuration held for the run (Spark pins it in the offset log), and the
    # shared session has its own setting back after it
    offsets = (lakehouse.checkpoint_path("arrivals_st") / "offsets" / "0").read_text()
    assert json.loads(offsets.splitlines()[1])["conf"]["spark.sql.shuffle.partitions"] == "12"
    assert spark.conf.get("spark.sql.shuffle.partitions") == before


def test_sdp_guide_for_loop_is_refused_as_by_sdp(spark, tmp_path: Path) -> None:
    """The guide's for-loop pattern declares ``@dp.table`` (a streaming table) over batch
    reads: ``spark-pipelines`` refuses it (``INVALID_FLOW_QUERY_TYPE.
    BATCH_RELATION_FOR_STREAMING_TABLE``), and so does lakefeed, before anything is written;
    the module-level ``collect()`` of the country names runs on the session."""
    for name, (data, schema) in RETAIL.items():
        catalog_table(spark, name, data, schema)
    project = copy_example("sdp_guide_for_loop", tmp_path, {"retail.ref.": "retail_ref_"})
    lakehouse = Lakehouse.at(tmp_path / "lh")
    with pytest.raises(PipelineError) as refused:
        lf.run(project, lakehouse=lakehouse, spark=spark)
    problems = refused.value.problems
    assert sorted(p.split("'")[1] for p in problems) == ["chile_sales", "new_zealand_sales"]
    assert all("returned a batch DataFrame" in p and "materialized_view" in p for p in problems)
    assert str(refused.value).startswith("[LAKEFEED:PIPELINE]")
    assert lakehouse.table_names() == []


def test_sdp_guide_sql(spark, tmp_path: Path) -> None:
    """The guide's SQL forms, as one folder of ``.sql`` files; their inputs are tables of the
    session's catalog, read in batch or as a stream (``STREAM x``, ``STREAM(x)``)."""
    vessel_inputs(spark)
    # parcel, depot, delivery time (epoch seconds as text, the guide's int -> timestamp form)
    deliveries = [(501, 1, "1767268800"), (502, 1, "1767355200"), (503, 2, "1767270000")]
    catalog_table(
        spark, "deliveries_source", deliveries, "parcel_id INT, depot_id INT, delivered_at STRING"
    )
    depots = {1: "Lyon", 2: "Porto"}
    catalog_table(spark, "depots_source", list(depots.items()), "depot_id INT, city STRING")
    replace = {"harbour.logistics.arrivals": "harbour_logistics_arrivals"}
    project = copy_example("sdp_guide_sql", tmp_path, replace)
    lakehouse = Lakehouse.at(tmp_path / "lh")
    result = lf.run(project, lakehouse=lakehouse, spark=spark)
    assert result.ok, result
    columns = ["vessel", "tons", "berth"]
    for name in ("arrivals_mv", "arrivals_st"):
        assert rows(lakehouse, name, columns) == ordered(ARRIVALS), name
    assert rows(lakehouse, "all_vessels", ["id", "name"]) == ordered(PIER_A + PIER_B)
    # the day of each delivery as the session's time zone sees it, counted per city and day
    zone = ZoneInfo(spark.conf.get("spark.sql.session.timeZone"))
    per_day: dict = {}
    for _, depot, seconds in deliveries:
        day = dt.datetime.fromtimestamp(int(seconds), zone).date()
        per_day[(depots[depot], day)] = per_day.get((depots[depot], day), 0) + 1
    columns = ["city", "delivery_day", "parcels"]
    assert rows(lakehouse, "daily_deliveries_by_city", columns) == ordered(
        (city, day, n) for (city, day), n in per_day.items()
    )
    assert not lakehouse.table_path("arrivals_tv").exists()


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
        "shop.landing_dir": str(source),
        "shop.archive_dir": str(backfill),
        "shop.export_path": str(sink),
        "shop.batch_log_path": str(batches),
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
    big = [r for r in clean if r[2] >= 100]
    assert rows(lakehouse, "big_order_count", ["count"]) == [(len(big),)]
    counts = [(c, sum(1 for _, other, _ in clean if other == c)) for c in {c for _, c, _ in clean}]
    assert rows(lakehouse, "customers", ["customer", "count"]) == ordered(counts)
    customers = DeltaTable(str(lakehouse.table_path("customers"))).metadata()
    assert customers.partition_columns == ["customer"]
    assert customers.description == "Customers with orders that pass the rules"
    backfilled = [(r["order_id"], r["customer"], r["amount"]) for r in BACKFILL]
    assert rows(lakehouse, "all_orders", columns) == ordered(clean + backfilled)
    delivered = DeltaTable(str(sink)).to_pyarrow_table().select(columns).to_pylist()
    assert ordered(tuple(r.values()) for r in delivered) == clean
    each = DeltaTable(str(batches)).to_pyarrow_table().select(columns).to_pylist()
    assert ordered(tuple(r.values()) for r in each) == clean
    assert not lakehouse.table_path("big_orders").exists()  # a view is not stored
    again = lf.run(CORPUS / "dlt_python", lakehouse=lakehouse, conf=conf, spark=spark)
    assert again.ok and len(table(lakehouse, "all_orders")) == len(clean) + 1  # once: once


PRICE_LISTS = [
    [{"sku": 1, "price": 2.5}, {"sku": 2, "price": 4.0}],
    [{"sku": 1, "price": 3.0}, {"sku": 3, "price": 1.25}],
]
STOCK = [(1, 40), (2, 0)]


def test_dlt_auto_cdc_from_snapshot(spark, tmp_path: Path) -> None:
    """Both documented ways: a view snapshotted on each update (SCD1: the target equals it),
    and a function giving numbered snapshots (SCD2: a row per version a key's value held, closed
    by the snapshot that changed or dropped it)."""
    price_lists = tmp_path / "price_lists"
    for version, listing in enumerate(PRICE_LISTS, start=1):
        _json_lines(price_lists, f"prices_v{version}.json", listing)
    catalog_table(spark, "warehouse_stock", STOCK, "sku INT, units INT")
    lakehouse = Lakehouse.at(tmp_path / "lh")
    conf = {"prices.snapshot_dir": str(price_lists)}
    result = lf.run(CORPUS / "dlt_auto_cdc_snapshot", lakehouse=lakehouse, conf=conf, spark=spark)
    assert result.ok, result
    assert rows(lakehouse, "stock_now", ["sku", "units"]) == STOCK
    history = rows(lakehouse, "price_history", ["sku", "price", "__START_AT", "__END_AT"])
    assert history == ordered(
        [(1, 2.5, 1, 2), (1, 3.0, 2, None), (2, 4.0, 1, 2), (3, 1.25, 2, None)]
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
        {"kafka.example:9092": broker.bootstrap, '"pos_events"': f'"{topic}"'},
    )
    lakehouse = Lakehouse.at(tmp_path / "lh")
    assert lf.run(project, lakehouse=lakehouse, spark=spark).ok
    assert len(table(lakehouse, "pos_events_raw")) == 0
    broker.produce(topic, ["o1", "o2"])
    assert lf.run(project, lakehouse=lakehouse, spark=spark).ok
    values = [bytes(v).decode() for v in table(lakehouse, "pos_events_raw")["value"].to_pylist()]
    assert sorted(values) == ["o1", "o2"]
    assert table(lakehouse, "pos_events_raw")["topic"].to_pylist() == [topic, topic]


def test_dlt_sql_reference(spark, tmp_path: Path) -> None:
    """Streaming tables with ``CONSTRAINT ... EXPECT`` (drop and warn), a materialized view,
    append flows (``INSERT INTO`` and ``INSERT INTO ONCE``), and AUTO CDC over one change feed
    as ``APPLY CHANGES INTO`` (SCD2) and ``CREATE FLOW ... AS AUTO CDC INTO`` (SCD1)."""
    from tests.compat.test_session_first import CHANGES, CHANGES_SCHEMA, SCD1, SCD2

    records = [tuple(r.values()) for r in ORDERS]
    schema = "order_id BIGINT, customer STRING, amount DOUBLE"
    catalog_table(spark, "orders_source", records, schema)
    catalog_table(spark, "archived_orders", [tuple(r.values()) for r in BACKFILL], schema)
    catalog_table(spark, "account_changes_source", CHANGES, CHANGES_SCHEMA)
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
    assert rows(lakehouse, "accounts_current", ["account_id", "holder", "plan"]) == ordered(SCD1)
    scd2 = ["account_id", "holder", "plan", "__START_AT", "__END_AT"]
    assert rows(lakehouse, "accounts_history", scd2) == ordered(SCD2)
