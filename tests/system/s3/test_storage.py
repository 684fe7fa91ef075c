"""Object storage without Spark: lakefeed's file layer, the lease and racing Delta commits on a
real S3-API server; the S3A settings a session gets (and the refusal when offline)."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.connectors.delta import CONNECTOR as DELTA
from lakefeed.core import storage
from lakefeed.core.errors import ConfigError, code_of
from lakefeed.delta import commit, log, table
from lakefeed.delta.files import STAGING, write_batches
from lakefeed.runtime import lease
from lakefeed.runtime.lease import ConditionalObjectLeaseStore, ObjectLeaseStore, lease_store
from lakefeed.spark import s3a
from tests.support.s3 import MotoServer

COMMITS_PER_WRITER = 6


def test_object_paths_and_lease(moto: MotoServer, s3_env: dict[str, str]) -> None:
    root = storage.as_path(f"s3://{moto.bucket()}/lh")
    assert isinstance(root, storage.ObjectPath) and not root.exists()
    (root / "checkpoints" / "a" / "offsets" / "0").write_text("v1\n{}")
    (root / "checkpoints" / "a" / "offsets" / ".0.tmp").write_text("")
    offsets = root / "checkpoints" / "a" / "offsets"
    assert offsets.is_dir() and (offsets / "0").is_file()
    assert [p.name for p in storage.listing(offsets)] == [".0.tmp", "0"]
    assert [p.name for p in storage.listing(offsets, ".*.tmp")] == [".0.tmp"]
    moved = (root / "checkpoints" / "a").rename(str(root / "checkpoints" / "b"))
    assert (moved / "offsets" / "0").read_text() == "v1\n{}"
    assert not (root / "checkpoints" / "a").exists()

    store = lease_store(root / "_lakefeed_lease.json")
    assert isinstance(store, ConditionalObjectLeaseStore)  # If-None-Match / If-Match by boto3
    assert store.create(b"one") and not store.create(b"two")
    found = store.read()
    assert found is not None and found[0] == b"one"
    assert not store.replace("stale-token", b"three")
    assert store.replace(found[1], b"three")
    again = store.read()
    assert again is not None and again[0] == b"three"
    assert not store.delete(found[1]) and store.delete(again[1]) and store.read() is None

    # validate --check-connections finds a Delta source table on object storage
    DeltaTable.create(str(root / "t"), pa.schema({"x": pa.int64()}))
    check = DELTA.check_connection
    assert check is not None
    found_table = check({"path": str(root / "t")})
    assert found_table is not None and found_table.detail == "table at version 0"
    no_table = check({"path": str(root / "checkpoints")})
    assert no_table is not None and not no_table.ok and "without _delta_log" in no_table.detail


def test_racing_lease_takers_on_s3_one_wins(
    moto: MotoServer, s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """Conditional writes make the object-store lease race-free: of many runs creating or
    replacing it at the same instant exactly one wins. Without boto3 the lease says it falls
    back to read-compare-write."""
    path = storage.as_path(f"s3://{moto.bucket()}/race-lease/_lakefeed_lease.json")
    stores = [lease_store(path) for _ in range(8)]
    start = threading.Barrier(len(stores))

    def create(store: lease.LeaseStore, content: bytes) -> str | None:
        start.wait()
        return store.create(content)

    with ThreadPoolExecutor(len(stores)) as pool:
        tokens = list(pool.map(create, stores, [f"run-{i}".encode() for i in range(8)]))
    assert sum(t is not None for t in tokens) == 1
    found = stores[0].read()
    assert found is not None and found[1] == next(t for t in tokens if t)

    def replace(store: lease.LeaseStore, content: bytes) -> str | None:
        start.wait()
        return store.replace(found[1], content)

    with ThreadPoolExecutor(len(stores)) as pool:
        replaced = list(pool.map(replace, stores, [f"taker-{i}".encode() for i in range(8)]))
    assert sum(t is not None for t in replaced) == 1

    monkeypatch.setattr(lease, "_s3_client", lambda _path: None)  # as without lakefeed[s3]
    assert isinstance(lease_store(path), ObjectLeaseStore)
    assert "boto3 is not installed" in caplog.text and "conditional writes" in caplog.text


def _writer(args: tuple[str, str, dict[str, str], float]) -> int:
    """One writer process: COMMITS_PER_WRITER appends, each a Delta commit with its own txn.
    Both writers start commit k at the same instant (``start + k`` seconds), so they race for
    the same log version."""
    root, app_id, env, start = args
    os.environ.update(env)
    spec = commit.WriteSpec(root=root, mode="append", partition_by=())
    for batch in range(COMMITS_PER_WRITER):
        data = pa.record_batch({"writer": [app_id] * 10, "batch": [batch] * 10})
        files = write_batches(root, iter([data]), (), f"part-{app_id}-{batch}-")
        time.sleep(max(0.0, start + batch - time.time()))
        commit.commit_stream_batch(spec, files, data.schema, app_id, batch)
    return COMMITS_PER_WRITER


def test_two_writers_race_without_losing_a_commit(moto: MotoServer, s3_env: dict[str, str]) -> None:
    root = f"s3://{moto.bucket()}/race"
    context = multiprocessing.get_context("spawn")
    DeltaTable.create(root, pa.schema({"writer": pa.string(), "batch": pa.int64()}))
    start = time.time() + 8  # after both processes have imported pyarrow and deltalake
    with context.Pool(2) as pool:
        done = pool.map(_writer, [(root, w, s3_env, start) for w in ("writer-a", "writer-b")])
    assert done == [COMMITS_PER_WRITER] * 2
    newest = log.latest_version(root)
    assert newest == 2 * COMMITS_PER_WRITER  # the create, then every commit of both writers
    versions = [v for v in range(newest + 1) if log.commit_actions(root, v) is not None]
    assert versions == list(range(newest + 1)), "a gap in the log"
    for version in versions:  # every commit file is whole JSON
        text = storage.read_bytes(log.commit_path(root, version)).decode()
        assert all(json.loads(line) for line in text.splitlines() if line)
    table = DeltaTable(root)
    rows = table.to_pyarrow_table()
    assert rows.num_rows == 2 * COMMITS_PER_WRITER * 10
    for app_id in ("writer-a", "writer-b"):
        assert table.transaction_version(app_id) == COMMITS_PER_WRITER - 1
        mine = rows.filter(pa.compute.equal(rows["writer"], app_id))
        assert sorted(set(mine["batch"].to_pylist())) == list(range(COMMITS_PER_WRITER))


def test_s3a_settings_follow_the_aws_environment(
    moto: MotoServer, s3_env: dict[str, str], tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3a, "cached", lambda ivy: True)
    ivy = str(tmp_path / "ivy")
    conf = s3a.spark_conf({"spark.hadoop.fs.s3a.path.style.access": "false", "spark.jars.ivy": ivy})
    assert conf["spark.jars.packages"] == f"org.apache.hadoop:hadoop-aws:{s3a.hadoop_version()}"
    assert conf["spark.hadoop.fs.s3.impl"] == s3a.S3A
    assert conf["spark.hadoop.fs.s3a.endpoint"] == moto.endpoint
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert "spark.hadoop.fs.s3a.path.style.access" not in conf  # the user's setting wins
    assert s3_env["AWS_SECRET_ACCESS_KEY"] not in json.dumps(conf)  # S3A reads it from the env
    own_jars = s3a.spark_conf({"spark.jars": "/jars/hadoop-aws-3.5.0.jar"})
    assert "spark.jars.packages" not in own_jars
    # Checkpoint files written in place (no rename = copy on S3), unless the user chose.
    chosen = {s3a.CHECKPOINT_MANAGER_CONF: "my.Manager"}
    assert s3a.checkpoint_conf({}) == {s3a.CHECKPOINT_MANAGER_CONF: s3a.CHECKPOINT_MANAGER}
    assert s3a.checkpoint_conf(chosen) == {}


def test_jars_spark_resolved_once_are_passed_as_plain_jars(tmp_path) -> None:
    # Resolved packages also become a Python app's spark.files (a 656 MB copy per session).
    ivy = tmp_path / "ivy"
    (ivy / "jars").mkdir(parents=True)
    jars = [
        ivy / "jars" / f"org.apache.hadoop_hadoop-aws-{s3a.hadoop_version()}.jar",
        ivy / "jars" / "bundle.jar",
    ]
    for jar in jars:
        jar.write_bytes(b"")
    first = s3a.spark_conf({"spark.jars.ivy": str(ivy)})
    assert first["spark.jars.packages"] == s3a.package()
    started = ",".join([f"file://{jars[0]}", f"file://{jars[1]}", "/elsewhere/lakefeed-spark.jar"])
    s3a.remember_resolution(started, {**first, "spark.jars.ivy": str(ivy)})
    later = s3a.spark_conf({"spark.jars.ivy": str(ivy), "spark.jars": "/mine.jar"})
    assert "spark.jars.packages" not in later
    assert later["spark.jars"] == ",".join(["/mine.jar", *map(str, jars)])
    jars[1].unlink()  # a cache cleaned since: Spark resolves again
    assert "spark.jars.packages" in s3a.spark_conf({"spark.jars.ivy": str(ivy)})


def test_s3a_settings_given_as_spark_conf_serve_lakefeeds_clients(
    moto: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage, "_REGISTERED", {})
    shared = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_ACCESS_KEY_ID"]
    for variable in [*shared, "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ALLOW_HTTP"]:
        monkeypatch.setenv(variable, "")  # set below: restored (or removed) after the test
        monkeypatch.delenv(variable)
    bucket = moto.bucket()
    env = moto.env()
    host = env["AWS_ENDPOINT_URL"].split("://", 1)[1]
    conf = {
        "spark.hadoop.fs.s3a.endpoint": host,  # S3A's host:port form
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.access.key": env["AWS_ACCESS_KEY_ID"],
        "spark.hadoop.fs.s3a.secret.key": env["AWS_SECRET_ACCESS_KEY"],
        "spark.hadoop.fs.s3a.endpoint.region": env["AWS_REGION"],
    }
    s3a.share_hadoop_settings(conf)
    assert os.environ["AWS_ENDPOINT_URL"] == f"http://{host}"
    storage.write_bytes(f"s3://{bucket}/x/one", b"1")  # pyarrow, through the shared settings
    assert storage.exists(f"s3://{bucket}/x/one")
    write_deltalake(f"s3://{bucket}/t", pa.table({"id": [1, 2]}))  # delta-rs, the same way
    assert DeltaTable(f"s3://{bucket}/t").to_pyarrow_table().num_rows == 2
    settings = storage.S3Settings.from_env()
    assert env["AWS_SECRET_ACCESS_KEY"] not in repr(settings)


def test_only_object_store_locations_add_s3a(tmp_path) -> None:
    assert not s3a.uses_object_store([tmp_path, "lakehouse", "file:///tmp/lh"])
    assert s3a.uses_object_store([tmp_path, "s3a://bucket/lh"])


def test_offline_without_cached_jars_is_refused_naming_them(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3a, "MAVEN_CENTRAL", ("127.0.0.1", 9))  # nothing listens there
    with pytest.raises(ConfigError) as refused:
        s3a.spark_conf({"spark.jars.ivy": str(tmp_path / "ivy")})
    assert code_of(refused.value) == s3a.JARS_UNAVAILABLE
    assert "org.apache.hadoop:hadoop-aws:" in str(refused.value)
    assert "spark.jars=" in str(refused.value)


def test_vacuum_removes_a_dead_writes_staging_on_s3(
    moto: MotoServer, s3_env: dict[str, str]
) -> None:
    root = f"s3://{moto.bucket()}/t"
    data = pa.record_batch({"x": [1, 2]})
    spec = commit.WriteSpec(root=root, mode="append", partition_by=())
    commit.commit_files(spec, write_batches(root, iter([data]), (), "part-"), data.schema)
    dead = storage.join(root, STAGING, "write-0123abcd")
    storage.write_bytes(storage.join(dead, "part-00000.snappy.parquet"), b"half a file")
    listed = table.vacuum(root, retention_hours=0, force=True, dry_run=True)
    assert f"{STAGING}/write-0123abcd/" in listed and storage.exists(dead)
    table.vacuum(root, retention_hours=0, force=True, dry_run=False)
    assert not storage.exists(dead)
    assert DeltaTable(root).to_pyarrow_table().num_rows == 2
