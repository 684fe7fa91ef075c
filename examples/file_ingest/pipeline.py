"""File ingestion: JSON order files landing in a folder → bronze Delta → validated silver.

bronze_orders picks up each landed file exactly once (``lf.read_files``: Auto Loader's
``cloudFiles`` options, the file log and offsets in the flow's checkpoint and schema folder),
keeps every record with its source file and modification time, and keeps what does not fit the
schema in ``_rescued_data``. A field the exporter adds later stops the flow once with a message
naming the new columns; the runtime restarts it and the table gains the column. silver_orders
drops rescued/malformed rows into ``silver_orders_quarantine`` with the failed rule.

Configuration (``--conf key=value``): ``files.landing`` (default ./landing),
``files.maxFilesPerTrigger`` (default 100).
"""

from pyspark.sql import functions as F

import lakefeed as lf


@lf.table(comment="every landed order record once, with its source file")
def bronze_orders():
    landing = lf.config("files.landing") or "landing"
    orders = lf.read_files(
        landing,
        "json",
        **{
            "cloudFiles.inferColumnTypes": True,
            "cloudFiles.schemaHints": "amount DOUBLE, order_time TIMESTAMP",
            "cloudFiles.maxFilesPerTrigger": lf.config("files.maxFilesPerTrigger") or 100,
        },
    )
    return orders.select(
        "*",
        F.col("_metadata.file_path").alias("source_file"),
        F.col("_metadata.file_modification_time").alias("file_time"),
    ).drop("_metadata")


@lf.table(comment="orders that parsed cleanly")
@lf.expect_or_drop("parsed", "_rescued_data IS NULL")
@lf.expect_or_drop("has_order_id", "order_id IS NOT NULL")
@lf.expect("positive_amount", "amount > 0")
def silver_orders():
    return lf.read_stream("bronze_orders")
