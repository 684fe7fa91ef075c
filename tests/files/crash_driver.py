"""Driver for the cloudFiles crash test: landing folder -> cloudFiles -> Delta, availableNow.

Run by tests/files/test_crash.py through tests/support/crash.py. Every run first lands a few
more files (named by run, so a restart does not land them twice), then ingests two files per
micro-batch until everything present is in the Delta table, read by lakefeed's reader or
(argument ``spark``) by Spark's JSON reader through the planned stream.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.support.crash import driver_session

FILES_PER_RUN = 6
ROWS_PER_FILE = 25


def land(folder: Path, run: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for k in range(FILES_PER_RUN):
        target = folder / f"run-{run}" / f"part-{k}.json"
        if target.exists():
            continue
        target.parent.mkdir(exist_ok=True)
        rows = [{"file": target.name, "run": run, "line": i} for i in range(ROWS_PER_FILE)]
        tmp = target.with_name("." + target.name)
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.rename(target)


def main(work: Path, reader: str) -> None:
    from pyspark.sql import functions as F

    land(work / "land", os.environ.get("LAKEFEED_CRASH_RUN", "x"))
    spark = driver_session("files-crash", work / "cp")
    stream = (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaLocation", str(work / "schema"))
        .option("cloudFiles.maxFilesPerTrigger", 2)
        .option("lakefeed.reader", reader)
    )
    if reader == "spark":  # Spark's JSON reader: a fixed schema, no lakefeed _metadata column
        stream = stream.schema("run STRING, file STRING, line BIGINT")
        path = F.concat(F.lit(f"{work / 'land'}/run-"), "run", F.lit("/"), "file")
    else:
        stream = stream.option("cloudFiles.schemaHints", "line BIGINT")
        path = F.col("_metadata.file_path")
    query = (
        stream.load(str(work / "land"))
        .select("run", "file", "line", path.alias("path"))
        .writeStream.format("delta")
        .option("path", str(work / "dst"))
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
