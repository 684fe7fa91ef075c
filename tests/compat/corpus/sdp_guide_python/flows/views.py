# Materialized views (named by the function and by name=) and a temporary view, in the forms
# pyspark's Declarative Pipelines guide documents; written for this suite with its own names.
from pyspark import pipelines as dp
from pyspark.sql import DataFrame


@dp.materialized_view
def arrivals_mv() -> DataFrame:
    return spark.table("harbour.logistics.arrivals")


@dp.materialized_view(name="arrivals_copy")
def arrivals_under_another_name() -> DataFrame:
    return spark.table("harbour.logistics.arrivals")


@dp.temporary_view
def arrivals_tv() -> DataFrame:
    return spark.table("harbour.logistics.arrivals")
