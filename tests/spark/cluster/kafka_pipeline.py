"""A Kafka → Delta flow for the cluster tests, loaded beside the IoT pipeline: every record of
``kafka.topic`` once per (partition, offset), a few micro-batches (``kafka.maxOffsetsPerTrigger``)
so a worker can be killed while it streams."""

from pyspark.sql import functions as F

import lakefeed as lf


@lf.table(comment="Kafka records read by executors on the cluster")
def kafka_messages():
    records = lf.read_kafka(
        lf.config("kafka.topic"),
        bootstrap_servers=lf.config("kafka.bootstrap"),
        startingOffsets="earliest",
        maxOffsetsPerTrigger=lf.config("kafka.maxOffsetsPerTrigger"),
    )
    return records.select(F.col("value").cast("string").alias("value"), "partition", "offset")
