"""Driver for the cloudFiles crash tests: landing folder -> cloudFiles -> Delta, availableNow.

Run by tests/connectors/files/test_crash.py (a local folder) and tests/system/s3/test_files.py
(every location on S3) through tests/support/crash.py. Every run first lands a few more files
(named by run, so a restart does not land them twice), then ingests two files per micro-batch
until everything present is in the Delta table, read by lakefeed's reader or (argument ``spark``) by
Spark's JSON reader through the planned stream. Rows keep ``_metadata.file_path``.
"""

from __future__ import annotations

import json
import os
import sys

from lakefeed.core import storage
from lakefeed.core.storage import AnyPath
from tests.support.crash import driver_session, run_to_end

FILES_PER_RUN = 6
ROWS_PER_FILE = 25


def land(folder: AnyPath, run: str) -> None:
    """Each file appears whole (a PUT on S3; locally a rename of a temporary file)."""
    for k in range(FILES_PER_RUN):
        target = folder / f"run-{run}" / f"part-{k}.json"
        if target.exists():
            continue
        rows = [{"file": target.name, "run": run, "line": i} for i in range(ROWS_PER_FILE)]
        storage.write_bytes(str(target), "".join(json.dumps(r) + "\n" for r in rows).encode())


def main(work: AnyPath, reader: str) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from lakefeed.connectors.files.schemas import METADATA_COLUMN, METADATA_TYPE

    land(work / "land", os.environ.get("LAKEFEED_CRASH_RUN", "x"))
    spark = driver_session("files-crash", work / "cp", storage=[str(work)])
    stream = (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaLocation", str(work / "schema"))
        .option("cloudFiles.maxFilesPerTrigger", 2)
        .option("lakefeed.reader", reader)
    )
    if reader == "spark":  # Spark's JSON reader: a fixed schema (nothing to rescue or evolve)
        fields = [StructField(n, StringType()) for n in ("run", "file")]
        fields += [
            StructField("line", LongType()),
            StructField(METADATA_COLUMN, METADATA_TYPE, False),
        ]
        stream = stream.schema(StructType(fields))
    else:
        stream = stream.option("cloudFiles.schemaHints", "line BIGINT")
    query = (
        stream.load(str(work / "land"))
        .selectExpr("run", "file", "line", "_metadata.file_path AS path")
        .writeStream.format("delta")
        .option("path", str(work / "dst"))
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    run_to_end(spark, query)


if __name__ == "__main__":
    main(storage.as_path(sys.argv[1]), sys.argv[2])
