# A streaming table over format("kafka") with Spark's Kafka options, the form pyspark's
# Declarative Pipelines guide documents ("Loading Data from Streaming Source"); written for this
# suite with its own names (the test maps the broker and topic to its own).
from pyspark import pipelines as dp
from pyspark.sql import DataFrame


@dp.table
def pos_events_raw() -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "kafka.example:9092")
        .option("subscribe", "pos_events")
        .load()
    )
