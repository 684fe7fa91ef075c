# https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html
# "Creating Streaming Table".
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.table
def basic_st() -> DataFrame:
    return spark.readStream.table("samples.nyctaxi.trips")
