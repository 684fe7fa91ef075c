# Tables declared in a for loop over names a batch query reads at import time, the pattern the
# SDP guide documents (https://spark.apache.org/docs/latest/declarative-pipelines-programming-guide.html, "Creating Tables in a For Loop"), written for this test. Like the
# guide's, it declares @dp.table (a streaming table) over batch reads.
from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql.functions import col, collect_list


@dp.temporary_view()
def orders_by_nation() -> DataFrame:
    orders = spark.table("samples.tpch.orders")
    customers = spark.table("samples.tpch.customer")
    joined = orders.join(customers, orders.o_custkey == customers.c_custkey)
    return joined.select(col("c_nationkey").alias("nationkey"), col("o_totalprice").alias("price"))


@dp.temporary_view()
def nation_regions() -> DataFrame:
    nations = spark.table("samples.tpch.nation")
    regions = spark.table("samples.tpch.region")
    joined = nations.join(regions, nations.n_regionkey == regions.r_regionkey)
    return joined.select(col("n_nationkey").alias("nationkey"), col("r_name").alias("region"))


region_names = spark.table("samples.tpch.region").select(collect_list("r_name")).first()[0]

for name in region_names:

    @dp.table(name=f"{name.lower().replace(' ', '_')}_customer_orders")
    def orders_in_region(region: str = name) -> DataFrame:
        by_region = spark.table("orders_by_nation").join(spark.table("nation_regions"), "nationkey")
        return by_region.filter(col("region") == region)
