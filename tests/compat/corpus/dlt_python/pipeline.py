# Databricks' DLT (Lakeflow Declarative Pipelines) Python reference, as its pages write it:
# https://docs.databricks.com/aws/en/dlt-ref/dlt-python-ref-table        (@dlt.table, @dlt.view)
# https://docs.databricks.com/aws/en/dlt/parameters                      (spark.conf.get)
# https://docs.databricks.com/aws/en/dlt/load                            (Auto Loader)
# https://docs.databricks.com/aws/en/dlt/expectations                    (expect_all* with dicts)
# https://docs.databricks.com/aws/en/dlt-ref/dlt-python-ref-append-flow  (append_flow, once=True)
# https://docs.databricks.com/aws/en/dlt/dlt-sinks                       (create_sink, foreach_batch_sink)
import dlt
from pyspark.sql.functions import col, sum

source_dir = spark.conf.get("mypipeline.source_dir")
backfill_dir = spark.conf.get("mypipeline.backfill_dir")
sink_path = spark.conf.get("mypipeline.sink_path")
batches_path = spark.conf.get("mypipeline.batches_path")

valid_orders = {"valid_id": "order_id IS NOT NULL", "valid_amount": "amount > 0"}
known_customers = {"has_customer": "customer IS NOT NULL"}


@dlt.table(comment="Raw orders, ingested with Auto Loader")
def orders_raw():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaHints", "order_id BIGINT, amount DOUBLE")
        .load(source_dir)
    )


@dlt.table(comment="Valid orders", table_properties={"quality": "silver"})
@dlt.expect_all(known_customers)
@dlt.expect_all_or_drop(valid_orders)
def orders_clean():
    return dlt.read_stream("orders_raw").select("order_id", "customer", "amount")


@dlt.view
def large_orders():
    return dlt.read("orders_clean").where(col("amount") >= 100)


@dlt.table(comment="Total per customer: a materialized view, its query reads in batch")
def customer_totals():
    return dlt.read("orders_clean").groupBy("customer").agg(sum("amount").alias("total"))


@dlt.table
def large_order_count():
    return dlt.read("large_orders").groupBy().count()


dlt.create_streaming_table("all_orders")


@dlt.append_flow(target="all_orders")
def live_orders():
    return dlt.read_stream("orders_clean")


@dlt.append_flow(target="all_orders", once=True)
def historical_orders():
    return spark.read.format("json").schema("order_id BIGINT, customer STRING, amount DOUBLE").load(backfill_dir)


dlt.create_sink("my_sink", "delta", {"path": sink_path})


@dlt.append_flow(name="flow", target="my_sink")
def flowFunc():
    return dlt.read_stream("orders_clean")


@dlt.foreach_batch_sink(name="batches")
def batches(df, batch_id):
    df.withColumn("batch_id", col("amount") * 0 + batch_id).write.format("delta").mode("append").save(batches_path)


@dlt.append_flow(target="batches")
def to_batches():
    return dlt.read_stream("orders_clean")


@dlt.materialized_view(
    name="customers",
    comment="Customers with valid orders",
    table_properties={"quality": "gold"},
    partition_cols=["customer"],
    spark_conf={"spark.sql.shuffle.partitions": "2"},
)
def customer_list():
    return dlt.read("orders_clean").groupBy("customer").count()
