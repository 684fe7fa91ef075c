# Materialized views (with and without name=) and a temporary view, in the forms the SDP guide
# documents (https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html), written for this test.
from pyspark import pipelines as dp
from pyspark.sql import DataFrame


@dp.materialized_view
def rides_mv() -> DataFrame:
    return spark.table("samples.nyctaxi.trips")


@dp.materialized_view(name="rides_copy")
def rides_under_another_name() -> DataFrame:
    return spark.table("samples.nyctaxi.trips")


@dp.temporary_view
def rides_tv() -> DataFrame:
    return spark.table("samples.nyctaxi.trips")
