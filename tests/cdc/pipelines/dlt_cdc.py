"""A Databricks DLT file, unchanged: SCD1 keeping the current value where an update is null."""

import dlt
from pyspark.sql.functions import col, expr

dlt.create_streaming_table("customers_patched")

dlt.apply_changes(
    target="customers_patched",
    source="changes",
    keys=["id"],
    sequence_by=col("seq"),
    apply_as_deletes=expr("op = 'DELETE'"),
    except_column_list=["op"],
    ignore_null_updates=True,
    stored_as_scd_type=1,
)
