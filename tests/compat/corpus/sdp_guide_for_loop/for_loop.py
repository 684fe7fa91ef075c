# Tables declared in a for loop over names read by a batch query while the file is imported, the
# pattern pyspark's Declarative Pipelines guide documents ("Creating Tables in a For Loop");
# written for this suite with its own names. As in the guide, each loop table is a @dp.table
# (a streaming table) over batch reads.
from pyspark import pipelines as dp
from pyspark.sql import DataFrame
from pyspark.sql.functions import col, collect_list


@dp.temporary_view()
def sales_by_city() -> DataFrame:
    sales = spark.table("retail.ref.sales")
    stores = spark.table("retail.ref.stores")
    joined = sales.join(stores, sales.store_id == stores.st_id)
    return joined.select(col("st_city").alias("city_id"), col("amount"))


@dp.temporary_view()
def city_countries() -> DataFrame:
    cities = spark.table("retail.ref.cities")
    countries = spark.table("retail.ref.countries")
    joined = cities.join(countries, cities.ci_country == countries.co_id)
    return joined.select(col("ci_id").alias("city_id"), col("co_name").alias("country"))


country_names = spark.table("retail.ref.countries").select(collect_list("co_name")).collect()[0][0]

for country in country_names:

    @dp.table(name=f"{country.lower().replace(' ', '_')}_sales")
    def sales_in_country(country_filter=country) -> DataFrame:
        by_country = spark.table("sales_by_city").join(spark.table("city_countries"), "city_id")
        return by_country.filter(f"country = '{country_filter}'")
