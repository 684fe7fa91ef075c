"""The seeds' "foreachBatch + JDBC" with Spark's own JDBC writer and the PostgreSQL driver jar
resolved from Maven Central by ``spark.jars.packages`` (cached by Spark's Ivy). Run by
tests/connectors/postgres/test_jdbc.py as ``WORK JDBC_URL``."""

from __future__ import annotations

import sys
from pathlib import Path

from lakefeed.session import spark_session
from tests.support.crash import run_to_end

PACKAGE = "org.postgresql:postgresql:42.7.14"


def main(work: Path, jdbc_url: str) -> None:
    spark = spark_session(
        "jdbc-sink",
        master="local[1]",
        conf={"spark.ui.enabled": "false", "spark.jars.packages": PACKAGE},
    )

    def to_postgres(batch, batch_id: int) -> None:  # noqa: ANN001 - a pyspark DataFrame
        (
            batch.write.format("jdbc")
            .option("url", jdbc_url)
            .option("dbtable", "events")
            .option("driver", "org.postgresql.Driver")
            .mode("append")
            .save()
        )

    query = (
        spark.readStream.format("delta")
        .load(str(work / "src"))
        .writeStream.foreachBatch(to_postgres)
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    run_to_end(spark, query)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
