# A streaming table over format("kafka") with Spark's options, the form the SDP guide documents
# (https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html, "Loading Data from Streaming Source"), written for this test.
from pyspark import pipelines as dp
from pyspark.sql import DataFrame


@dp.table
def raw_orders() -> DataFrame:
    reader = spark.readStream.format("kafka").option("kafka.bootstrap.servers", "localhost:9092")
    return reader.option("subscribe", "orders").load()
