# DLT's Python API in the forms Databricks' reference pages document, written for this suite
# with its own order data: @dlt.table, @dlt.view and @dlt.materialized_view (Python reference),
# parameters read with spark.conf.get (pipeline parameters), Auto Loader (loading data),
# expect_all / expect_all_or_drop with dicts (expectations), append_flow with once=True
# (append flows), create_sink and foreach_batch_sink (sinks).
import dlt
from pyspark.sql.functions import col, sum

landing_dir = spark.conf.get("shop.landing_dir")
archive_dir = spark.conf.get("shop.archive_dir")
export_path = spark.conf.get("shop.export_path")
batch_log_path = spark.conf.get("shop.batch_log_path")

order_rules = {"order_has_id": "order_id IS NOT NULL", "amount_positive": "amount > 0"}
customer_rules = {"customer_named": "customer IS NOT NULL"}


@dlt.table(comment="Orders as they land, read by Auto Loader")
def orders_raw():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaHints", "order_id BIGINT, amount DOUBLE")
        .load(landing_dir)
    )


@dlt.table(comment="Orders that pass the rules", table_properties={"layer": "silver"})
@dlt.expect_all(customer_rules)
@dlt.expect_all_or_drop(order_rules)
def orders_clean():
    return dlt.read_stream("orders_raw").select("order_id", "customer", "amount")


@dlt.view
def big_orders():
    return dlt.read("orders_clean").where(col("amount") >= 100)


@dlt.table(comment="Spend per customer; a batch read makes it a materialized view")
def customer_totals():
    return dlt.read("orders_clean").groupBy("customer").agg(sum("amount").alias("total"))


@dlt.table
def big_order_count():
    return dlt.read("big_orders").groupBy().count()


dlt.create_streaming_table("all_orders")


@dlt.append_flow(target="all_orders")
def current_orders():
    return dlt.read_stream("orders_clean")


@dlt.append_flow(target="all_orders", once=True)
def archived_orders():
    schema = "order_id BIGINT, customer STRING, amount DOUBLE"
    return spark.read.format("json").schema(schema).load(archive_dir)


dlt.create_sink("orders_export", "delta", {"path": export_path})


@dlt.append_flow(name="export_clean_orders", target="orders_export")
def export_orders():
    return dlt.read_stream("orders_clean")


@dlt.foreach_batch_sink(name="batch_log")
def batch_log(df, batch_id):
    tagged = df.withColumn("batch_id", col("amount") * 0 + batch_id)
    tagged.write.format("delta").mode("append").save(batch_log_path)


@dlt.append_flow(target="batch_log")
def to_batch_log():
    return dlt.read_stream("orders_clean")


@dlt.materialized_view(
    name="customers",
    comment="Customers with orders that pass the rules",
    table_properties={"layer": "gold"},
    partition_cols=["customer"],
    spark_conf={"spark.sql.shuffle.partitions": "2"},
)
def customers_with_orders():
    return dlt.read("orders_clean").groupBy("customer").count()
