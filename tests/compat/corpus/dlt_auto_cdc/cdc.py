# Databricks' documented AUTO CDC example, "SCD type 1 and SCD type 2 processing with CDF
# source data": https://docs.databricks.com/aws/en/dlt/cdc (Python), as written but for the
# source (a Delta folder from spark.conf instead of the catalog table cdc_data.users) and the
# two targets' names, which share one pipeline here.
import dlt
from pyspark.sql.functions import col, expr

@dlt.view
def users():
  return spark.readStream.format("delta").load(spark.conf.get("cdc.users"))

dlt.create_streaming_table("target_scd1")

dlt.create_auto_cdc_flow(
  target = "target_scd1",
  source = "users",
  keys = ["userId"],
  sequence_by = col("sequenceNum"),
  apply_as_deletes = expr("operation = 'DELETE'"),
  apply_as_truncates = expr("operation = 'TRUNCATE'"),
  except_column_list = ["operation", "sequenceNum"],
  stored_as_scd_type = 1
)

dlt.create_streaming_table("target_scd2")

dlt.create_auto_cdc_flow(
  target = "target_scd2",
  source = "users",
  keys = ["userId"],
  sequence_by = col("sequenceNum"),
  apply_as_deletes = expr("operation = 'DELETE'"),
  except_column_list = ["operation", "sequenceNum"],
  stored_as_scd_type = "2"
)
