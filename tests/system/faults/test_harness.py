"""The fault harness itself: request classification, plan counting, and each faulting layer
against a real client (boto3 and pyarrow through the S3 proxy, plain file calls through FUSE)."""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.support.faults import Fault, FaultPlan, classify_s3, fired, set_plan
from tests.support.fusefaults import FaultMount, mounted_or_skip
from tests.support.s3 import MotoServer
from tests.support.s3faults import S3FaultProxy


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "kind"),
    [
        ("GET", "/b/t/_delta_log/00.json", "", {}, "read"),
        ("GET", "/b", "list-type=2&prefix=t/", {}, "list"),
        ("PUT", "/b/t/part-0.parquet", "", {}, "write"),
        ("PUT", "/b/t/x", "", {"x-amz-copy-source": "/b/t/y"}, "copy"),
        ("DELETE", "/b/t/x", "", {}, "delete"),
        ("POST", "/b", "delete", {}, "delete"),
        ("POST", "/b/t/x", "uploads", {}, "write"),
        ("HEAD", "/b/t/x", "", {}, "head"),
    ],
)
def test_s3_requests_are_classified(method, path, query, headers, kind) -> None:
    assert classify_s3(method, path, query, headers) == kind


def test_a_fault_meets_the_nth_matching_operation_and_the_times_after() -> None:
    plan = FaultPlan([Fault("write", 2, pattern="_delta_log/", times=2)])
    hits = [plan.decide(op, key) is not None for op, key in [
        ("write", "t/_delta_log/0.json"), ("write", "t/part-0"), ("read", "t/_delta_log/0.json"),
        ("write", "t/_delta_log/1.json"), ("write", "t/_delta_log/2.json"),
        ("write", "t/_delta_log/3.json"),
    ]]  # fmt: skip
    assert hits == [False, False, False, True, True, False]
    assert plan.counts == {"write": 5, "read": 1}


def test_faults_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown fault action"):
        Fault("write", 1, "explode")
    with pytest.raises(ValueError, match="count from 1"):
        Fault("write", 0)


@pytest.fixture
def proxy(moto: MotoServer, tmp_path: Path) -> Iterator[S3FaultProxy]:
    server = S3FaultProxy(moto.endpoint, tmp_path / "plan.json", tmp_path / "proxy.log").start()
    yield server
    server.stop()


def _client(proxy: S3FaultProxy):  # noqa: ANN202 - boto3's client type is generated
    return boto3.client(
        "s3",
        endpoint_url=proxy.endpoint,
        region_name="us-east-1",
        aws_access_key_id="lakefeed-test",
        aws_secret_access_key="lakefeed-test-secret",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}),
    )


def test_the_proxy_fails_the_nth_write_with_an_s3_error(moto, proxy) -> None:
    s3, bucket = _client(proxy), moto.bucket()
    set_plan(proxy.plan, [Fault("write", 2, "fail", status=503)])
    s3.put_object(Bucket=bucket, Key="a", Body=b"1")
    with pytest.raises(ClientError) as error:
        s3.put_object(Bucket=bucket, Key="b", Body=b"2")
    assert error.value.response["Error"]["Code"] == "SlowDown"
    s3.put_object(Bucket=bucket, Key="c", Body=b"3")
    listed = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [o["Key"] for o in listed] == ["a", "c"]
    assert [hit["key"] for hit in fired(proxy.plan)] == [f"/{bucket}/b"]


def test_the_proxy_cuts_a_read_short_and_passes_copies(moto, proxy) -> None:
    s3, bucket = _client(proxy), moto.bucket()
    s3.put_object(Bucket=bucket, Key="k", Body=b"x" * 1000)
    s3.copy_object(Bucket=bucket, Key="k2", CopySource={"Bucket": bucket, "Key": "k"})
    assert s3.head_object(Bucket=bucket, Key="k2")["ContentLength"] == 1000
    set_plan(proxy.plan, [Fault("read", 1, "truncate", pattern="/k2")])
    with pytest.raises(Exception, match="(?i)incomplete|connection|length|read"):
        s3.get_object(Bucket=bucket, Key="k2")["Body"].read()
    assert s3.get_object(Bucket=bucket, Key="k2")["Body"].read() == b"x" * 1000


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[FaultMount]:
    with mounted_or_skip(tmp_path) as mount:
        yield mount


@pytest.mark.faults
def test_fuse_passes_files_through_and_fails_the_nth_write(mounted: FaultMount) -> None:
    root = mounted.mountpoint
    (root / "a").write_bytes(b"abc")
    assert (mounted.backing / "a").read_bytes() == b"abc"
    set_plan(mounted.plan, [Fault("write", 1, "enospc"), Fault("rename", 1, "fail")])
    with pytest.raises(OSError) as full:
        (root / "b").write_bytes(b"data")
    assert full.value.errno == errno.ENOSPC
    with pytest.raises(OSError) as failed:
        os.rename(root / "a", root / "c")
    assert failed.value.errno == errno.EIO
    os.rename(root / "a", root / "c")
    assert sorted(os.listdir(root)) == ["b", "c"]


@pytest.mark.faults
def test_fuse_tears_a_write_and_fails_reads_and_lists(mounted: FaultMount) -> None:
    root = mounted.mountpoint
    set_plan(mounted.plan, [Fault("write", 1, "truncate"), Fault("list", 1, "fail")])
    (root / "torn").write_bytes(b"12345678")  # reported whole
    assert (mounted.backing / "torn").read_bytes() == b"1234"
    with pytest.raises(OSError):
        os.listdir(root)
    set_plan(mounted.plan, [Fault("unlink", 1, "fail", pattern="torn")])
    with pytest.raises(OSError):
        os.unlink(root / "torn")
    assert os.listdir(root) == ["torn"]


@pytest.mark.faults
def test_fuse_keeps_hard_links_and_a_no_replace_rename(mounted: FaultMount) -> None:
    root = mounted.mountpoint
    (root / "tmp").write_bytes(b"new")
    (root / "log").write_bytes(b"old")
    with pytest.raises(FileExistsError):
        os.link(root / "tmp", root / "log")  # how lakefeed's lease creates its file
    os.link(root / "tmp", root / "lease")
    assert (root / "lease").read_bytes() == b"new"
    libc = ctypes.CDLL(None, use_errno=True)  # delta-rs commits by RENAME_NOREPLACE
    assert libc.renameat2(-100, str(root / "tmp").encode(), -100, str(root / "log").encode(), 1)
    assert ctypes.get_errno() == errno.EEXIST
    assert (root / "log").read_bytes() == b"old"
