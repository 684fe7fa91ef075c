"""lakefeed's own Delta commits on S3 (issue 33): tables with the writer features delta-rs
refuses (``domainMetadata``, ``clustering``, ``inCommitTimestamp``), made as delta-spark makes
them and uploaded to the test's S3-API server, take appends, stream batches (exactly once) and
deletion-vector DELETEs committed by conditional PUT; racing writers lose no commit; a store
without conditional writes is refused before anything is written. Rows are read back with
delta-rs's kernel reader. Spark-free: one table per test, a few commits each."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable as RsTable

from lakefeed.core import storage
from lakefeed.core.errors import ConflictError, code_of
from lakefeed.delta import (
    clauses,
    commit,
    files,
    log,
    log_append,
    merger,
    operations,
    post_commit,
)
from lakefeed.delta.clauses import Clause
from tests.delta.test_clustered_writes import _check_log, _log, _rows, make_clustered
from tests.delta.test_foreign_tables import expected
from tests.support.s3 import MotoServer

NO_CONDITIONAL = "STORAGE_NO_CONDITIONAL_WRITES"
APP = "5eed0033-0000-4000-8000-000000000533"
RACERS, COMMITS = 2, 3


def _uploaded(local: Path, moto: MotoServer) -> str:
    """The table made at ``local``, copied into a fresh bucket: its URI."""
    root = f"s3://{moto.bucket()}/clustered"
    fs, path = storage.filesystem(root)
    pafs.copy_files(str(local), path, destination_filesystem=fs)
    return root


@pytest.fixture
def clustered(moto: MotoServer, s3_env: dict[str, str], tmp_path: Path) -> str:
    """A table clustered by ``region`` with in-commit timestamps and deletion vectors, as
    delta-spark creates it (9 rows in two commits), on S3."""
    return _uploaded(Path(make_clustered(tmp_path / "t")), moto)


def _stream_batch(
    root: str, app_id: str, batch_id: int, start: int, ready: threading.Barrier | None = None
) -> commit.CommitResult:
    """One micro-batch of two rows; ``ready``: wait for the other writers before committing."""
    spec = commit.WriteSpec(root, "append", (), operation="STREAMING UPDATE")
    rows = _rows(start, 2).to_batches()[0]
    prefix = files.stream_file_prefix(app_id, batch_id) + "00000-"
    written = files.write_batches(root, iter([rows]), (), prefix)
    if ready is not None:
        ready.wait()
    return commit.commit_stream_batch(spec, written, rows.schema, app_id, batch_id)


def test_appends_stream_batches_delete_and_merge_commit_on_s3(clustered: str) -> None:
    """A batch append, stream batches with their ``txn`` (a replay is skipped), a DELETE and a
    MERGE writing deletion vectors (planned on a checkpoint delta-rs wrote there): each a
    commit lakefeed creates with ``If-None-Match``, read back by delta-rs as the rows written;
    the clustering domain and in-commit timestamps kept."""
    root = clustered
    spec = commit.WriteSpec(root, "append", ())
    batch = _rows(9, 4)
    written = files.write_batches(root, iter(batch.to_batches()), (), "part-batch-")
    assert commit.commit_files(spec, written, batch.schema).version == 2
    assert not _stream_batch(root, APP, 0, 20).skipped
    assert _stream_batch(root, APP, 0, 20).skipped  # the batch replayed: exactly once
    assert RsTable(root).transaction_version(APP) == 0
    due = {post_commit.CHECKPOINT_INTERVAL: "3"}  # the checkpoint at version 3, on S3
    assert post_commit.run(root, due, 3, 2, lambda: RsTable(root)) == ()
    assert "_last_checkpoint" in storage.list_names(storage.join(root, log.LOG_DIR))
    metrics = operations.delete(root, "id = 1")  # planned on the checkpoint's files
    assert metrics is not None and metrics["num_deleted_rows"] == 1
    last = _log(root)[-1]
    assert any("deletionVector" in a.get("add", {}) for a in last)  # merge-on-read, on S3
    assert any(name.startswith("deletion_vector_") for name in storage.list_names(root))
    upsert = [Clause(clauses.MATCHED_UPDATE_ALL), Clause(clauses.INSERT_ALL)]
    changed = pa.concat_tables([_rows(3, 1), _rows(40, 1)]).set_column(
        2, "amount", pa.array([-3.0, 40.0])
    )
    merger.merge(root, changed, "t.id = s.id", upsert, source_alias="s", target_alias="t")
    assert any("deletionVector" in a.get("add", {}) for a in _log(root)[-1])
    rows = {row[0]: row for row in expected(root)}
    assert sorted(rows) == [i for i in range(13) if i != 1] + [20, 21, 40]
    assert rows[3][2] == -3.0 and rows[40][2] == 40.0
    assert log.latest_version(root) == 5
    _check_log(root)


def test_racing_writers_on_s3_lose_no_commit(clustered: str) -> None:
    """Writers that commit on the same version at the same instant: the conditional PUT lets
    one create it, the others find the winner's commit, check it by Delta's rules (blind
    appends do not conflict) and take the next version. Every batch lands once, no gap."""
    root = clustered
    start = threading.Barrier(RACERS)

    def race(writer: int) -> list[int]:
        versions = []
        for batch in range(COMMITS):
            first = 100 * (writer + 1) + 2 * batch
            result = _stream_batch(root, f"racer-{writer}", batch, first, start)
            assert result.version is not None
            versions.append(result.version)
        return versions

    with ThreadPoolExecutor(RACERS) as pool:
        taken = [v for versions in pool.map(race, range(RACERS)) for v in versions]
    assert sorted(taken) == list(range(2, 2 + RACERS * COMMITS))
    assert log.latest_version(root) == 1 + RACERS * COMMITS
    table = RsTable(root)
    assert [table.transaction_version(f"racer-{w}") for w in range(RACERS)] == [COMMITS - 1] * 2
    assert len(expected(root)) == 9 + RACERS * COMMITS * 2
    _check_log(root)


def test_a_zombie_batch_of_the_same_application_conflicts_on_s3(clustered: str) -> None:
    """Two commits of one application's ``txn`` planned on the same version: the second finds
    the first's commit at its version and conflicts (Delta's rule for a zombie writer)."""
    root = clustered
    info = log_append.info("STREAMING UPDATE", False, ())
    assert log_append.commit(root, 1, [], False, (APP, 7), info) == 2
    with pytest.raises(ConflictError, match="same application"):
        log_append.commit(root, 1, [], False, (APP, 7), info)
    assert log.latest_version(root) == 2


def test_a_store_declared_without_conditional_writes_is_refused(
    clustered: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S3A's ``fs.s3a.create.conditional.enabled=false`` for the table (a store without
    conditional PUT): a write that must commit itself is refused with its code before it
    writes; so is one under delta-rs's DynamoDB lock, which lakefeed does not take."""
    root = clustered
    before = storage.files_under(root)
    monkeypatch.setattr(storage, "_REGISTERED", {})
    storage.register(root, {storage.CONDITIONAL_CREATE: "false"})
    with pytest.raises(Exception) as error:
        operations.delete(root, "id = 1")
    assert code_of(error.value) == NO_CONDITIONAL and "conditional" in str(error.value)
    monkeypatch.setattr(storage, "_REGISTERED", {})
    monkeypatch.setenv(storage.LOCKING_PROVIDER, "dynamodb")
    with pytest.raises(Exception) as error:
        operations.delete(root, "id = 1")
    assert code_of(error.value) == NO_CONDITIONAL and "DynamoDB" in str(error.value)
    assert storage.files_under(root) == before


def test_a_create_is_exclusive_where_a_check_would_pass(
    moto: MotoServer, s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The create is the store's conditional PUT, not a check then a PUT: with the check
    blinded (another writer's object landing right after it), the existing object stays."""
    location = f"s3://{moto.bucket()}/t/_delta_log/00000000000000000001.json"
    assert storage.create_exclusive(location, b"first")
    monkeypatch.setattr(storage, "exists", lambda _location: False)
    assert not storage.create_exclusive(location, b"second")
    assert storage.read_bytes(location) == b"first"


class _Answers:
    """A boto3-like client whose ``put_object`` calls get ``answers`` in turn, the last one
    from then on (None: it succeeds)."""

    class exceptions:  # noqa: N801 - boto3's attribute name
        class ClientError(Exception):
            def __init__(self, code: str) -> None:
                super().__init__(code)
                self.response = {"Error": {"Code": code}}

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)

    def put_object(self, **_request: Any) -> dict[str, str]:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if answer is not None:
            raise self.exceptions.ClientError(answer)
        return {"ETag": json.dumps("etag")}


@pytest.mark.parametrize(
    ("answer", "why"), [(None, "ignores If-None-Match"), ("NotImplemented", "NotImplemented")]
)
def test_a_store_that_ignores_the_condition_is_found_by_the_probe(
    monkeypatch: pytest.MonkeyPatch, answer: str | None, why: str
) -> None:
    """A store that lets the second create of one key through, or answers that it does not
    implement the condition: the probe says so and the commit is refused with its code."""
    monkeypatch.setattr(storage, "_probed", {})
    monkeypatch.setattr(storage, "s3_client", lambda _location: _Answers(answer))
    root = "s3://old-store/t"
    assert why in (storage.exclusive_create_refusal(root) or "")
    with pytest.raises(Exception) as error:
        storage.check_exclusive_creates(root, "a commit")
    assert code_of(error.value) == NO_CONDITIONAL
    monkeypatch.setattr(storage, "_probed", {})
    monkeypatch.setattr(storage, "s3_client", lambda _location: _Answers("PreconditionFailed"))
    assert storage.exclusive_create_refusal(root) is None


def test_a_create_racing_another_conditional_write_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S3 answers 409 while another conditional write of the key is in flight: the create is
    tried again and gets the store's final answer (never taken as lost: its version could stay
    empty)."""
    monkeypatch.setattr(storage.time, "sleep", lambda _s: None)
    client = _Answers("ConditionalRequestConflict", "PreconditionFailed")
    assert storage._put_if_absent(client, "s3://b/t/_delta_log/1.json", b"") is False
    client = _Answers("ConditionalRequestConflict", None)
    assert storage._put_if_absent(client, "s3://b/t/_delta_log/1.json", b"") is True
