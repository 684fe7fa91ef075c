# A streaming table, a materialized view over a batch file read, and two append flows into one
# streaming table, in the forms pyspark's Declarative Pipelines guide documents; written for
# this suite with its own names.
from pyspark import pipelines as dp
from pyspark.sql import DataFrame


@dp.table
def arrivals_st() -> DataFrame:
    return spark.readStream.table("harbour.logistics.arrivals")


@dp.materialized_view
def manifests_mv() -> DataFrame:
    return spark.read.format("json").load("/landing/harbour/manifests")


dp.create_streaming_table("all_vessels")


@dp.append_flow(target="all_vessels")
def from_pier_a() -> DataFrame:
    return spark.readStream.table("vessels_pier_a")


@dp.append_flow(target="all_vessels")
def from_pier_b() -> DataFrame:
    return spark.readStream.table("vessels_pier_b")
