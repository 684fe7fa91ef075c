"""AUTO CDC with a one-off backfill, in DLT's form: the change history kept in a batch
dataset is applied once (``once=True``), the live change feed as a stream; an SCD1 and an SCD2
target."""

import dlt
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, expr

import lakefeed as lf

spark = SparkSession.active()

CHANGES = "id BIGINT, seq BIGINT, op STRING, a BIGINT, b STRING"
HISTORY = [
    (1, 1, "UPSERT", 10, "p"),
    (2, 1, "UPSERT", 20, "q"),
    (2, 2, "DELETE", None, None),
    (3, 4, "UPSERT", 30, "r"),
    (5, 1, "UPSERT", 50, "s"),
]


@dlt.view
def history():
    return spark.createDataFrame(HISTORY, CHANGES)


@dlt.view
def changes():
    # The live change feed: JSON files landing in the folder the configuration names.
    landing = spark.conf.get("once.landing")
    return lf.read_files(landing, "json", schema=CHANGES).drop("_metadata")


for target, scd in (("accounts", 1), ("accounts_history", 2)):
    dlt.create_streaming_table(target)
    for source, once in (("changes", False), ("history", True)):
        dlt.create_auto_cdc_flow(
            target=target,
            source=source,
            keys=["id"],
            sequence_by=col("seq"),
            apply_as_deletes=expr("op = 'DELETE'"),
            except_column_list=["op"],
            stored_as_scd_type=scd,
            name=f"{target}_{'backfill' if once else 'live'}",
            once=once,
        )
