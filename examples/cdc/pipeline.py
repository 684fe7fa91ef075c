"""CDC from Kafka: Debezium change events → bronze → SCD1 + SCD2 customers, SCD1 orders → gold.

``bronze_changes`` keeps every Kafka record of both topics as it arrived, with the Debezium
envelope's fields pulled out (``op``, ``lsn``, the changed table, ``before``/``after`` as JSON
text). The views ``customer_changes`` and ``order_changes`` turn a table's events into change
rows (a delete carries its key from ``before``; tombstones are skipped), and AUTO CDC applies
them, ordered by the database's log position (``lsn``), so duplicates and events arriving out
of order change nothing: ``customers`` holds each customer's current row (SCD type 1),
``customers_history`` every version with ``__START_AT``/``__END_AT`` (SCD type 2, LSNs),
``orders`` the current orders. ``customer_orders`` joins each order to its customer as the
customer is now (a materialized view, recomputed each update).

Configuration (``spark-pipeline.yml``, or ``--conf key=value``): ``cdc.bootstrap`` (default
127.0.0.1:9092), ``cdc.customersTopic`` (shop.public.customers), ``cdc.ordersTopic``
(shop.public.orders). ``produce.py`` feeds the topics; see README.md.
"""

from pyspark.sql import functions as F

import lakefeed as lf

ENVELOPE = (
    "op STRING, before STRING, after STRING, ts_ms BIGINT, "
    "source STRUCT<table: STRING, lsn: BIGINT, ts_ms: BIGINT>"
)
CUSTOMER = "customer_id BIGINT, name STRING, email STRING, country STRING"
ORDER = "order_id BIGINT, customer_id BIGINT, amount DOUBLE, status STRING"


@lf.table(comment="Debezium change events as they arrived, exactly once per Kafka offset")
def bronze_changes():
    topics = [
        lf.config("cdc.customersTopic", "shop.public.customers"),
        lf.config("cdc.ordersTopic", "shop.public.orders"),
    ]
    records = lf.read_kafka(
        topics,
        bootstrap_servers=lf.config("cdc.bootstrap", "127.0.0.1:9092"),
        startingOffsets="earliest",
    )
    value = F.col("value").cast("string")
    event = F.from_json(value, ENVELOPE)
    return records.select(
        F.col("key").cast("string").alias("key"),
        value.alias("value"),
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_time"),
        event["source"]["table"].alias("table"),
        event["op"].alias("op"),
        event["source"]["lsn"].alias("lsn"),
        F.timestamp_millis(event["source"]["ts_ms"]).alias("committed_at"),
        event["before"].alias("before"),
        event["after"].alias("after"),
    )


def _changes(table: str, schema: str):
    """A table's change rows: the row after the change (before it, for a delete)."""
    events = lf.read_stream("bronze_changes").where(
        (F.col("table") == table) & F.col("op").isNotNull()  # a tombstone has no op
    )
    row = F.from_json(F.coalesce("after", "before"), schema).alias("row")
    return events.select(row, "op", "lsn", "committed_at").select(
        "row.*", "op", "lsn", "committed_at"
    )


@lf.view(comment="customers' change rows")
def customer_changes():
    return _changes("customers", CUSTOMER)


@lf.view(comment="orders' change rows")
def order_changes():
    return _changes("orders", ORDER)


lf.create_streaming_table("customers", comment="current customers (SCD type 1)")
lf.create_auto_cdc_flow(
    target="customers",
    source="customer_changes",
    keys=["customer_id"],
    sequence_by="lsn",
    apply_as_deletes="op = 'd'",
    except_column_list=["op"],
)

lf.create_streaming_table("customers_history", comment="every customer version (SCD type 2)")
lf.create_auto_cdc_flow(
    target="customers_history",
    source="customer_changes",
    keys=["customer_id"],
    sequence_by="lsn",
    apply_as_deletes="op = 'd'",
    except_column_list=["op", "lsn"],
    stored_as_scd_type=2,
    track_history_except_column_list=["committed_at"],
)

lf.create_streaming_table("orders", comment="current orders (SCD type 1)")
lf.create_auto_cdc_flow(
    target="orders",
    source="order_changes",
    keys=["order_id"],
    sequence_by="lsn",
    apply_as_deletes="op = 'd'",
    except_column_list=["op"],
)


@lf.materialized_view(comment="each order with its customer as the customer is now")
def customer_orders():
    customers = lf.read("customers").select("customer_id", "name", "email", "country")
    orders = lf.read("orders").select("order_id", "customer_id", "amount", "status")
    return orders.join(customers, "customer_id", "left").select(
        "order_id", "customer_id", "name", "email", "country", "amount", "status"
    )
