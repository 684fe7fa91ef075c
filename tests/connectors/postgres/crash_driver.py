"""Driver for the PostgreSQL sink's kill -9 test: a lakefeed pipeline whose append flow streams
a Delta source into a ``postgres`` sink (``lf.create_sink``).

Run by tests/connectors/postgres/test_crash.py through tests/support/crash.py with ``WORK URL``.
Appends without keys, so a batch applied twice would show as duplicate ids. Run 1 kills itself right
after its first PostgreSQL commit, before Spark's commit log records the batch: the restart
must replay that batch as a no-op.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.support.crash import driver_session

PIPELINE = """
import lakefeed as lf

lf.create_sink("events", "postgres", {"url": lf.config("crash.url"), "dbtable": "events"})


@lf.append_flow(target="events")
def to_events():
    return lf.source("delta", path=lf.config("crash.src"), maxFilesPerTrigger=1)
"""


def _die_after_first_commit() -> None:
    """Wrap the sink's batch write: its transaction commits, then the driver is killed."""
    from lakefeed.connectors.postgres import adapters

    original = adapters.write_batch

    def write_then_die(*args: Any) -> int | None:
        original(*args)
        os.killpg(os.getpgid(0), signal.SIGKILL)
        return None

    adapters.write_batch = write_then_die


def main(work: Path, url: str) -> None:
    import lakefeed as lf

    if os.environ.get("LAKEFEED_CRASH_RUN") == "1":
        _die_after_first_commit()
    pipeline = work / "pipeline"
    pipeline.mkdir(exist_ok=True)
    (pipeline / "p.py").write_text(PIPELINE)
    lakehouse = lf.Lakehouse.at(work / "lh")
    spark = driver_session("postgres-crash", Path(lakehouse.checkpoint_path("to_events")))
    conf = {"crash.url": url, "crash.src": str(work / "src")}
    result = lf.run(pipeline, lakehouse=lakehouse, conf=conf, spark=spark)
    spark.stop()
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
