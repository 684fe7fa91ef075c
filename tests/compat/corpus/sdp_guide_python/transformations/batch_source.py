# https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html
# "Loading Data from Batch Source".
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.materialized_view
def batch_mv() -> DataFrame:
    return spark.read.format("json").load("/datasets/retail-org/sales_orders")
