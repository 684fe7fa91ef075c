# A streaming table, a batch source and two append flows into one target, in the forms the SDP
# guide documents (https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html), written for this test.
from pyspark import pipelines as dp
from pyspark.sql import DataFrame


@dp.table
def rides_st() -> DataFrame:
    return spark.readStream.table("samples.nyctaxi.trips")


@dp.materialized_view
def orders_mv() -> DataFrame:
    return spark.read.format("json").load("/datasets/retail-org/sales_orders")


dp.create_streaming_table("all_customers")


@dp.append_flow(target="all_customers")
def from_west() -> DataFrame:
    return spark.readStream.table("customers_us_west")


@dp.append_flow(target="all_customers")
def from_east() -> DataFrame:
    return spark.readStream.table("customers_us_east")
