"""Storage that fails under a run ends it with a coded, transient error and its fix, never a
raw ``OSError`` or ``Py4JJavaError``: a Delta commit and a checkpoint marker rename on EIO
(delta-rs and Python), a write through Hadoop's file system (the JVM, as a state store or a
checkpoint log writes), all on the FUSE fault file system; and a whole run whose Delta log
cannot be written, which a later run completes with every row once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakefeed as lf
from lakefeed.core.explain import explain
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline import guard
from lakefeed.pipeline.graph import PipelineError
from lakefeed.runtime.event_log import read_events
from tests.pipeline.support import write
from tests.support.faults import Fault, set_plan
from tests.support.fusefaults import FaultMount, mounted_or_skip

pytestmark = pytest.mark.faults
OUTAGE = 10_000  # the matching operations from the Nth on all fail


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[FaultMount]:
    with mounted_or_skip(tmp_path) as mount:
        yield mount


def _coded(error: BaseException) -> str:
    failure = explain(error)
    assert failure.code == "STORAGE_FAILED" and failure.permanent is False, failure
    assert "nothing after the last committed batch was lost" in failure.message
    assert "\x1b" not in failure.message  # delta-rs's coloured arrows are gone
    return failure.message


def test_a_delta_commit_and_a_marker_rename_on_eio_are_coded(mounted: FaultMount) -> None:
    table = str(mounted.mountpoint / "t")
    write_deltalake(table, pa.table({"a": [1]}))
    set_plan(mounted.plan, [Fault("write", 1, pattern="_delta_log", times=OUTAGE)])
    with pytest.raises(OSError) as commit:
        write_deltalake(table, pa.table({"a": [2]}), mode="append")
    assert "Generic LocalFileSystem error" in _coded(commit.value)

    set_plan(mounted.plan, [Fault("rename", 1, times=OUTAGE)])
    checkpoint = mounted.mountpoint / "checkpoint"
    checkpoint.mkdir()
    with pytest.raises(OSError) as rename:
        guard.write_identity(checkpoint, guard.Identity("p", "flow", "t"))
    assert "_lakefeed.json" in _coded(rename.value)


def test_other_os_errors_keep_their_own_message() -> None:
    """A missing file, a permission, a Python worker Spark cannot start: no retry helps, and
    the storage is not to blame."""
    worker = 'Caused by: java.io.IOException: Cannot run program "python3": error=2, No such file'
    for error in (
        FileNotFoundError(2, "No such file or directory"),
        PermissionError(13, "Permission denied"),
        RuntimeError(f"An error occurred while calling o1.start.\n{worker}"),
    ):
        assert explain(error).code is None


def test_a_jvm_write_on_eio_is_coded(spark, mounted: FaultMount) -> None:  # noqa: ANN001
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"file://{mounted.mountpoint}/state/1.delta")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    set_plan(mounted.plan, [Fault("write", 1, pattern="1.delta", times=OUTAGE)])
    with pytest.raises(Exception) as failed:  # noqa: PT011 - py4j's Py4JJavaError
        out = fs.create(path)
        out.write(b"x" * 100_000)
        out.close()
    assert type(failed.value).__name__ == "Py4JJavaError"
    assert "IOException" in _coded(failed.value)


PIPELINE = """
import lakefeed as lf

@lf.table
def events():
    return lf.read_files(lf.config("t.landing"), "json", schema="id BIGINT").drop("_metadata")
"""


def test_a_run_whose_delta_log_fails_ends_coded_and_the_next_completes(
    spark,
    mounted: FaultMount,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    flows = write(tmp_path / "flows", {"pipeline.py": PIPELINE})
    lakehouse = Lakehouse.at(mounted.mountpoint / "lh")
    landing = write(tmp_path / "landing", {f"{n}.json": f'{{"id": {n}}}\n' for n in range(5)})
    conf = {"t.landing": str(landing)}

    def run() -> object:
        return lf.run(flows, lakehouse=lakehouse, conf=conf, spark=spark, mode="available-now",
                      max_restarts=1)  # fmt: skip

    # The table's creation (version 0) passes; every later write to its log fails.
    set_plan(mounted.plan, [Fault("write", 2, pattern="events/_delta_log/", times=OUTAGE)])
    with pytest.raises(PipelineError) as failed:
        run()
    assert "[STORAGE_FAILED]" in str(failed.value)
    failures = read_events(lakehouse.event_log_path, event_types=["flow_failed"])
    assert failures and {e["details"]["code"] for e in failures} == {"STORAGE_FAILED"}
    assert not any(e["details"]["permanent"] for e in failures)  # restarted: transient

    set_plan(mounted.plan, [])
    run()
    ids = DeltaTable(str(lakehouse.table_path("events"))).to_pyarrow_table()["id"].to_pylist()
    assert sorted(ids) == list(range(5))
