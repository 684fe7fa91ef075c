# https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html
# "Creating Temporary View".
from pyspark import pipelines as dp
from pyspark.sql import DataFrame

@dp.temporary_view
def basic_tv() -> DataFrame:
    return spark.table("samples.nyctaxi.trips")
