"""Spark's checkpoint files on S3 through lakefeed's ``ObjectStoreCheckpointFileManager``, against
moto: each file is one PUT (no S3A probes), a file that must not be overwritten is refused by a
conditional PUT (also when two writers race for it), a cancelled write leaves nothing, and a
store declared without conditional writes gets S3A's probing create. One Spark session in a
subprocess serves every assertion (the test process may already hold a session without S3A)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.s3 import MotoServer, access_log

EXISTS = "org.apache.hadoop.fs.FileAlreadyExistsException"

DRIVER = """
import json, sys
from py4j.protocol import Py4JJavaError
from lakefeed.session import spark_session

root = sys.argv[1]
spark = spark_session(master="local[1]", storage=[root], conf={"spark.ui.enabled": "false"})
jvm = spark._jvm
Path = jvm.org.apache.hadoop.fs.Path
conf = spark._jsc.hadoopConfiguration()
manager = jvm.dev.lakefeed.spark.ObjectStoreCheckpointFileManager


def refused(call):
    try:
        call()
    except Py4JJavaError as error:
        return error.java_exception.getClass().getName()
    return None


def create(files, name, text, overwrite=False):
    out = files.createAtomic(Path(f"{root}/{name}"), overwrite)
    out.write(bytearray(text.encode()))
    return out


def add(files, name, text):  # as Spark's HDFSMetadataLog.write: on a failure cancel, re-raise
    out = create(files, name, text)
    try:
        out.close()
    except Exception:
        out.cancel()
        raise


def read(files, name):
    path = Path(f"{root}/{name}")
    if not files.exists(path):
        return None
    stream = files.open(path)
    try:
        return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode()
    finally:
        stream.close()


files = manager(Path(root), conf)
files.mkdirs(Path(root))
seen = {}
print("MARK one-put", flush=True)
create(files, "0", "first").close()
print("MARK conditional", flush=True)
seen["existing"] = refused(lambda: add(files, "0", "second"))
seen["kept"] = read(files, "0")
first, second = create(files, "1", "a"), create(files, "1", "b")
first.close()
seen["race"] = refused(second.close)
seen["race_kept"] = read(files, "1")
cancelled = create(files, "2", "half")
cancelled.cancel()
seen["cancelled"] = read(files, "2")
create(files, "0", "replaced", overwrite=True).close()
seen["overwritten"] = read(files, "0")
plain = jvm.org.apache.hadoop.conf.Configuration(conf)
plain.set("fs.s3a.create.conditional.enabled", "false")
for scheme in ("s3", "s3a"):
    plain.set(f"fs.{scheme}.impl.disable.cache", "true")
probing = manager(Path(root), plain)
print("MARK probing", flush=True)
seen["probed"] = refused(lambda: create(probing, "0", "again"))
print("RESULT " + json.dumps(seen), flush=True)
spark.stop()
"""


@pytest.fixture(scope="module")
def seen(moto: MotoServer, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = f"s3://{moto.bucket('checkpoint')}/cp/offsets"
    driver = tmp_path_factory.mktemp("checkpoint-files") / "driver.py"
    driver.write_text(DRIVER)
    env = {**os.environ, **moto.env(), "PYTHONPATH": str(Path(__file__).parents[3])}
    before = len(moto.log.read_text(errors="replace").splitlines())
    done = subprocess.run(
        [sys.executable, str(driver), root], env=env, capture_output=True, text=True, timeout=600
    )
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert results, done.stdout[-2000:] + done.stderr[-4000:]
    requests = moto.log.read_text(errors="replace").splitlines()[before:]
    return {**json.loads(results[0].removeprefix("RESULT ")), "requests": requests}


def _requests_on(seen: dict, key: str) -> list[str]:
    """(method, status) of the requests on ``key`` in moto's log, in order."""
    return [
        f"{op} {status}"
        for op, target, status in access_log(seen["requests"])
        if target.endswith(key) or f"prefix={key.lstrip('/')}" in target
    ]


@pytest.mark.timeout(900)
def test_a_checkpoint_file_is_one_put_without_probes(seen: dict) -> None:
    assert _requests_on(seen, "/cp/offsets/0")[0] == "PUT 200"
    assert _requests_on(seen, "/cp/offsets/1")[:2] == ["PUT 200", "PUT 412"]


def test_an_existing_file_is_refused_by_the_conditional_put(seen: dict) -> None:
    assert seen["existing"] == EXISTS and seen["kept"] == "first"
    assert seen["race"] == EXISTS and seen["race_kept"] == "a"  # of two racing writers, one wins


def test_a_cancelled_write_leaves_nothing_and_overwrite_replaces(seen: dict) -> None:
    assert seen["cancelled"] is None
    assert not [r for r in _requests_on(seen, "/cp/offsets/2") if r.startswith("PUT")]
    assert seen["overwritten"] == "replaced"


def test_a_store_without_conditional_writes_gets_s3as_probing_create(seen: dict) -> None:
    assert seen["probed"] == EXISTS  # refused at create, by S3A's HEAD
