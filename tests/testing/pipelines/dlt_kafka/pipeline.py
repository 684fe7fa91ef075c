# A DLT pipeline as Databricks documents Kafka ingestion: the file reads the topic itself with
# spark.readStream.format("kafka"); nothing lakefeed-specific. Fed by lakefeed.testing.
import dlt
from pyspark.sql.functions import col, from_json

payment = "payment_id STRING, amount DOUBLE"


@dlt.table(comment="Payments as the topic holds them")
def payments_raw():
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "broker.invalid:9092")
        .option("subscribe", "payments")
        .option("startingOffsets", "earliest")
        .load()
    )


@dlt.table(comment="Parsed payments; a payment without an amount is dropped")
@dlt.expect_or_drop("has_amount", "amount IS NOT NULL")
def payments():
    parsed = from_json(col("value").cast("string"), payment).alias("p")
    return dlt.read_stream("payments_raw").select(col("offset"), parsed).select("offset", "p.*")


@dlt.table(comment="Refunds from a second topic, read in the same flow as orders")
def ledger():
    def topic(name):
        return (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", "broker.invalid:9092")
            .option("subscribe", name)
            .load()
        )

    entries = topic("charges").unionByName(topic("refunds"))
    return entries.select(col("topic"), col("value").cast("string").alias("entry"))
