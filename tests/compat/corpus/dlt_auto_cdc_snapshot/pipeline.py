# Databricks' AUTO CDC FROM SNAPSHOT, as its reference writes the two ways to use it:
# https://docs.databricks.com/aws/en/dlt-ref/dlt-python-ref-apply-changes-from-snapshot
# https://docs.databricks.com/aws/en/dlt/cdc  ("periodic" and "historical" snapshot ingestion)
import os

import dlt


# Periodic snapshots: a table or view of the pipeline, read whole on each update.
@dlt.view(name="source")
def source():
    return spark.read.table("mycatalog_myschema_mytable")


dlt.create_streaming_table("target_periodic")

dlt.create_auto_cdc_from_snapshot_flow(
    target="target_periodic",
    source="source",
    keys=["key"],
    stored_as_scd_type=1,
)

# Historical snapshots: a function giving the next snapshot and its version, None when done.
snapshot_dir = spark.conf.get("mypipeline.snapshot_dir")


def exist(file_name):
    return os.path.exists(file_name)


def next_snapshot_and_version(latest_snapshot_version):
    latest_snapshot_version = latest_snapshot_version or 0
    next_version = latest_snapshot_version + 1
    file_name = snapshot_dir + "/snapshot_" + str(next_version) + ".json"
    if exist(file_name):
        return (spark.read.schema("key INT, value STRING").json(file_name), next_version)
    else:
        # No snapshot available
        return None


dlt.create_streaming_table("target_historical")

dlt.create_auto_cdc_from_snapshot_flow(
    target="target_historical",
    source=next_snapshot_and_version,
    keys=["key"],
    stored_as_scd_type=2,
)
