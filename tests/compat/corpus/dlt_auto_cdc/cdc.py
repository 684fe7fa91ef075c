# AUTO CDC with Column arguments, in the form Databricks documents it (Lakeflow "AUTO CDC APIs",
# SCD type 1 and type 2 from a change feed, Python), written for this suite with its own names:
# one view of account changes feeds a current-state (SCD1) and a history (SCD2) target.
import dlt
from pyspark.sql.functions import col, expr


@dlt.view
def account_changes():
    return spark.readStream.format("delta").load(spark.conf.get("accounts.changes_path"))


dlt.create_streaming_table("accounts_current")

dlt.create_auto_cdc_flow(
    target="accounts_current",
    source="account_changes",
    keys=["account_id"],
    sequence_by=col("change_seq"),
    apply_as_deletes=expr("op = 'DELETE'"),
    apply_as_truncates=expr("op = 'TRUNCATE'"),
    except_column_list=["op", "change_seq"],
    stored_as_scd_type=1,
)

dlt.create_streaming_table("accounts_history")

dlt.create_auto_cdc_flow(
    target="accounts_history",
    source="account_changes",
    keys=["account_id"],
    sequence_by=col("change_seq"),
    apply_as_deletes=expr("op = 'DELETE'"),
    except_column_list=["op", "change_seq"],
    stored_as_scd_type="2",
)
