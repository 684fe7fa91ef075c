# AUTO CDC FROM SNAPSHOT in the two forms Databricks documents (Python reference of
# create_auto_cdc_from_snapshot_flow: a periodic snapshot of a table or view, and historical
# snapshots handed over by a function), written for this suite with its own names and data.
from pathlib import Path

import dlt


# Periodic: a view of a catalog table, taken whole at each update.
@dlt.view(name="stock_levels")
def stock_levels_view():
    return spark.read.table("warehouse_stock")


dlt.create_streaming_table("stock_now")

dlt.create_auto_cdc_from_snapshot_flow(
    target="stock_now",
    source="stock_levels",
    keys=["sku"],
    stored_as_scd_type=1,
)

# Historical: numbered price lists in a folder named by a pipeline parameter.
price_lists = Path(spark.conf.get("prices.snapshot_dir"))


def next_price_list(last_version):
    """The price list after ``last_version`` (None before the first) with its number, or None
    when the folder has no newer one."""
    version = (last_version or 0) + 1
    listing = price_lists / f"prices_v{version}.json"
    if not listing.exists():
        return None
    return spark.read.schema("sku INT, price DOUBLE").json(str(listing)), version


dlt.create_streaming_table("price_history")

dlt.create_auto_cdc_from_snapshot_flow(
    target="price_history",
    source=next_price_list,
    keys=["sku"],
    stored_as_scd_type=2,
)
