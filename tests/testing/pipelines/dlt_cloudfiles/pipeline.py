# A DLT pipeline reading JSON files with Auto Loader, as Databricks documents it:
# spark.readStream.format("cloudFiles") and a path from the pipeline's configuration.
import dlt
from pyspark.sql.functions import col

landing = spark.conf.get("shop.landing")


@dlt.table
def orders_raw():
    return (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .schema("order_id BIGINT, customer STRING, amount DOUBLE")
        .load(landing)
    )


@dlt.table
@dlt.expect_or_drop("positive", "amount > 0")
def orders():
    return dlt.read_stream("orders_raw").select("order_id", "customer", col("amount"))


@dlt.table
def spend():
    return dlt.read("orders").groupBy("customer").sum("amount")
