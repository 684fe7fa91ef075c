"""Driver for the cloudFiles crash test: landing folder -> cloudFiles -> Delta, availableNow.

Run by tests/files/test_crash.py through tests/support/crash.py. Every run first lands a few
more files (named by run, so a restart does not land them twice), then ingests two files per
micro-batch until everything present is in the Delta table.
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


def main(work: Path) -> None:
    land(work / "land", os.environ.get("LAKEFEED_CRASH_RUN", "x"))
    spark = driver_session("files-crash")
    query = (
        spark.readStream.format("cloudFiles")
        .option("cloudFiles.format", "json")
        .option("cloudFiles.schemaLocation", str(work / "schema"))
        .option("cloudFiles.schemaHints", "line BIGINT")
        .option("cloudFiles.maxFilesPerTrigger", 2)
        .load(str(work / "land"))
        .selectExpr("run", "file", "line", "_metadata.file_path AS path")
        .writeStream.format("delta")
        .option("path", str(work / "dst"))
        .option("checkpointLocation", str(work / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
