"""One writer per lakehouse: a pipeline run holds a lease on its lakehouse folder.

Two runs on the same lakehouse would both start: their flows would fight over the same
checkpoints and tables, restart each other, and remove each other's staging files, with only
Spark's and Delta's conflict checks between them and lost data. So a run first takes the lease
``<lakehouse>/_lakefeed_lease.json`` (holder host, pid, run id, pipeline, since, heartbeat); a
second run is refused before anything starts, naming the holder. A heartbeat thread renews the
lease; the run releases it at exit. A lease whose holder died is *stale* — its heartbeat is
older than the TTL, or its process is gone from the process space the taker shares with it —
and the next run takes it over. A pid means something only inside one PID namespace of one
boot of one machine: containers often share a hostname while each has its own PID namespace,
so the lease records that space (the kernel's boot id and the PID namespace's inode) and the
process's start time, and judges a holder by its pid only from inside the same space (a
recycled pid with another start time is a dead holder too); from anywhere else, only the
heartbeat counts. Read-only commands (``status``, ``events``, ``ui``, ``validate``,
``verify --no-run``) never take it.

Every change is conditional, so two runs can never both believe they hold the lease: it is
created only if absent, and replaced (heartbeat, takeover) or deleted (release) only if it is
still exactly the version the caller read. :class:`LeaseStore` is that contract.
:class:`LocalLeaseStore` keeps it on a local disk (an atomic hard link creates the file only
when it is absent, like ``O_CREAT|O_EXCL`` but with the content complete; compare-and-replace
runs under an ``flock`` that the kernel releases when its holder dies). On object storage the
same contract is a conditional PUT — ``If-None-Match: *`` to create, ``If-Match: <ETag>`` to
replace — and a conditional DELETE, with the ETag as the version token
(:class:`ConditionalObjectLeaseStore`, through boto3: ``pip install 'lakefeed[s3]'``). Without
boto3, or on a store that answers that it does not implement conditional requests, the lease
falls back to read-compare-write (:class:`ObjectLeaseStore`) and says so in the log.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from lakefeed.core import storage
from lakefeed.core.errors import LeaseError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.logs import get_logger
from lakefeed.core.storage import AnyPath, ObjectPath

log = get_logger(__name__)

TTL_S = 60.0
"""A lease whose heartbeat is older than this is stale, whatever host holds it."""
HEARTBEAT_S = 10.0
RELEASE_ATTEMPTS = 3


class LeaseStore(Protocol):
    """Where a lease lives; every write is conditional (see the module docstring)."""

    def create(self, content: bytes) -> str | None:
        """Write ``content`` only if no lease exists: its version token, None when one does."""
        ...

    def read(self) -> tuple[bytes, str] | None:
        """The lease and its version token, None when there is none."""
        ...

    def replace(self, token: str, content: bytes) -> str | None:
        """Write ``content`` only if the lease is still at version ``token``: the new token,
        None when it is not."""
        ...

    def delete(self, token: str) -> bool:
        """Remove the lease only if it is still at version ``token``."""
        ...


@dataclass(frozen=True)
class LocalLeaseStore:
    """A lease file on a local disk (POSIX hard links and ``flock``)."""

    path: Path

    def create(self, content: bytes) -> str | None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}.tmp")
        temporary.write_bytes(content)
        try:
            os.link(temporary, self.path)  # fails if the lease exists: one creator wins
            return _token(content)
        except FileExistsError:
            return None
        finally:
            with contextlib.suppress(OSError):  # a leftover temporary file harms no one
                temporary.unlink()

    def read(self) -> tuple[bytes, str] | None:
        return _read(self.path)

    def replace(self, token: str, content: bytes) -> str | None:
        with self._locked():
            found = self.read()
            if found is None or found[1] != token:
                return None
            temporary = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}.tmp")
            temporary.write_bytes(content)
            os.replace(temporary, self.path)
            return _token(content)

    def delete(self, token: str) -> bool:
        with self._locked():
            found = self.read()
            if found is None or found[1] != token:
                return False
            self.path.unlink()
            return True

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass(frozen=True)
class ObjectLeaseStore:
    """A lease object in an S3 bucket without conditional writes, through
    :mod:`lakefeed.core.storage` (pyarrow's S3 client): the fallback when boto3 is missing or the
    store does not implement conditional requests.

    Each change reads, compares the version token and writes, then reads back: two runs
    starting within the same second could both pass the check, and the later write wins (the
    loser sees it at its next heartbeat and stops). Exactly-once still holds then: each Delta
    commit is conditional (delta-rs puts log files with ``If-None-Match``) and a replayed batch
    is skipped by its ``txn``.
    """

    path: ObjectPath

    def create(self, content: bytes) -> str | None:
        if self.read() is not None:
            return None
        self.path.write_bytes(content)
        return _token(content) if self.path.read_bytes() == content else None

    def read(self) -> tuple[bytes, str] | None:
        return _read(self.path)

    def replace(self, token: str, content: bytes) -> str | None:
        found = self.read()
        if found is None or found[1] != token:
            return None
        self.path.write_bytes(content)
        return _token(content)

    def delete(self, token: str) -> bool:
        found = self.read()
        if found is None or found[1] != token:
            return False
        self.path.unlink(missing_ok=True)
        return True


class ConditionalObjectLeaseStore:
    """A lease object in an S3 bucket changed only by conditional requests (boto3): a PUT with
    ``If-None-Match: *`` creates it, ``If-Match: <ETag>`` replaces or deletes it, so of two
    runs racing for it exactly one wins, as on a local disk.

    A store that answers the first create with ``NotImplemented`` (501) has no conditional
    writes: this lease then falls back to :class:`ObjectLeaseStore` and logs that it did.
    """

    def __init__(self, path: ObjectPath, client: Any) -> None:
        self.path = path
        self.bucket, self.key = storage.bucket_key(path.uri)
        self.client = client
        self.fallback: ObjectLeaseStore | None = None

    def create(self, content: bytes) -> str | None:
        if self.fallback is not None:
            return self.fallback.create(content)
        try:
            answer = self.client.put_object(
                Bucket=self.bucket, Key=self.key, Body=content, IfNoneMatch="*"
            )
        except self._client_error as error:
            if storage.error_code(error) in ("NotImplemented", "501"):
                log.warning(
                    f"the object store of {self.path} does not implement conditional writes: "
                    "the lakehouse lease falls back to read-compare-write, where two runs "
                    "starting within the same second can both start (exactly-once still holds)"
                )
                self.fallback = ObjectLeaseStore(self.path)
                return self.fallback.create(content)
            if _precondition_failed(error):
                return None
            raise
        return str(answer["ETag"])

    def read(self) -> tuple[bytes, str] | None:
        if self.fallback is not None:
            return self.fallback.read()
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except self._client_error as error:
            if storage.error_code(error) in ("NoSuchKey", "404"):
                return None
            raise
        return answer["Body"].read(), str(answer["ETag"])

    def replace(self, token: str, content: bytes) -> str | None:
        if self.fallback is not None:
            return self.fallback.replace(token, content)
        try:
            answer = self.client.put_object(
                Bucket=self.bucket, Key=self.key, Body=content, IfMatch=token
            )
        except self._client_error as error:
            if _precondition_failed(error):
                return None
            raise
        return str(answer["ETag"])

    def delete(self, token: str) -> bool:
        if self.fallback is not None:
            return self.fallback.delete(token)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=token)
        except self._client_error as error:
            if _precondition_failed(error):
                return False
            raise
        return True

    @property
    def _client_error(self) -> type[Exception]:
        return self.client.exceptions.ClientError


def _precondition_failed(error: Exception) -> bool:
    """S3 refuses a failed condition with 412; a concurrent conditional write with 409."""
    return storage.error_code(error) in (
        "PreconditionFailed",
        "412",
        "ConditionalRequestConflict",
        "409",
    )


def _s3_client(path: ObjectPath) -> Any | None:
    """A boto3 S3 client with the location's settings, None when boto3 is not installed."""
    return storage.s3_client(path.uri)


def lease_store(path: AnyPath) -> LeaseStore:
    """The store for a lease at ``path``: a local file or an object in a bucket (conditional
    writes through boto3 when it is installed; otherwise said in the log)."""
    if not isinstance(path, ObjectPath):
        return LocalLeaseStore(path)
    client = _s3_client(path)
    if client is None:
        log.warning(
            f"boto3 is not installed: the lease on {path} uses read-compare-write instead of "
            "S3's conditional writes (install lakefeed[s3] for a race-free lease)"
        )
        return ObjectLeaseStore(path)
    return ConditionalObjectLeaseStore(path, client)


def _token(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _read(path: AnyPath) -> tuple[bytes, str] | None:
    """A lease's content and version token, None when there is none (either store)."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return None
    return content, _token(content)


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, since when, and when it last said it was alive (epoch seconds).

    ``space`` names the process space ``pid`` lives in (boot id and PID namespace, see
    :func:`process_space`) and ``started`` the process's start time in it: a lease written
    before they were recorded has neither, and is judged by its heartbeat alone."""

    host: str
    pid: int
    run_id: str
    pipeline: str
    since: float
    heartbeat: float
    space: str | None = None
    started: int | None = None

    def encode(self) -> bytes:
        return json.dumps(asdict(self), indent=2).encode()

    @classmethod
    def decode(cls, content: bytes) -> Holder | None:
        """The holder, or None for content no run could have written (a damaged lease)."""
        try:
            data = json.loads(content)
            started = data.get("started")
            return cls(
                str(data["host"]),
                int(data["pid"]),
                str(data["run_id"]),
                str(data["pipeline"]),
                float(data["since"]),
                float(data["heartbeat"]),
                str(data["space"]) if data.get("space") else None,
                int(started) if started is not None else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    @classmethod
    def of_this_process(cls, run_id: str, pipeline: str, now: float) -> Holder:
        pid = os.getpid()
        host = socket.gethostname()
        return cls(host, pid, run_id, pipeline, now, now, process_space(), _start_time(pid))

    def stale(self, now: float, ttl: float) -> bool:
        """Silent for longer than ``ttl``, or gone from the process space this process shares
        with it (the same pid there with another start time is another process)."""
        if now - self.heartbeat > ttl:
            return True
        if self.space is None or self.space != process_space():
            return False  # its pid means nothing here: only the heartbeat can tell
        return not _alive(self.pid) or _start_time(self.pid) != self.started

    def describe(self, now: float) -> str:
        return (
            f"run {self.run_id} of pipeline {self.pipeline!r}, pid {self.pid} on host "
            f"{self.host}, since {_iso(self.since)} (last heartbeat {now - self.heartbeat:.0f}s "
            "ago)"
        )


def process_space() -> str | None:
    """Where a pid means one process: this boot of this machine (the kernel's boot id) and
    this PID namespace (its inode). Containers on one machine share the boot id and often the
    hostname, but each has its own PID namespace. None where the kernel does not tell."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot}/{namespace}"


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks after boot, ``/proc/<pid>/stat`` field 22): with
    the pid, it names one process, even after the pid is recycled."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _refuse_if_live(holder: Holder | None, now: float, ttl: float, where: str) -> None:
    if holder is not None and not holder.stale(now, ttl):
        raise LeaseError(
            f"lakehouse {where} is in use by {holder.describe(now)}",
            fix=f"wait for that run to end, or stop it (kill {holder.pid} on {holder.host}); a "
            "run that died frees the lakehouse by itself (at once from the same host or "
            f"container, {ttl:.0f}s after its last heartbeat from elsewhere)",
        )


def check_free(lakehouse: Lakehouse, ttl: float = TTL_S) -> None:
    """Refuse at once when a live run holds the lakehouse (e.g. before a Spark session starts);
    the run still takes the lease itself, this only answers sooner."""
    found = lease_store(lakehouse.lease_path).read()
    if found is not None:
        _refuse_if_live(Holder.decode(found[0]), time.time(), ttl, str(lakehouse.root))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


class Lease:
    """The lease of one run: :meth:`acquire`, renewed by a heartbeat thread, :meth:`release`.

    ``on_lost`` is called (from the heartbeat thread) if another run took the lease over, which
    happens only when this one looked dead: the run must stop.
    """

    def __init__(
        self,
        store: LeaseStore,
        run_id: str,
        pipeline: str,
        *,
        where: str = "",
        ttl: float = TTL_S,
        heartbeat: float = HEARTBEAT_S,
        on_lost: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.where = where
        self.ttl = ttl
        self.interval = heartbeat
        self.on_lost = on_lost
        self.holder = Holder.of_this_process(run_id, pipeline, time.time())
        self._token: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_lakehouse(
        cls,
        lakehouse: Lakehouse,
        run_id: str,
        pipeline: str,
        on_lost: Callable[[str], None] | None = None,
    ) -> Lease:
        store = lease_store(lakehouse.lease_path)
        return cls(store, run_id, pipeline, where=str(lakehouse.root), on_lost=on_lost)

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lease, or take over a stale one; :class:`LeaseError` if it is held."""
        for _ in range(5):
            content = self.holder.encode()
            token = self.store.create(content)
            if token is not None:
                return self._held(token)
            found = self.store.read()
            if found is None:
                continue  # released meanwhile
            now = time.time()
            other = Holder.decode(found[0])
            _refuse_if_live(other, now, self.ttl, self.where)
            token = self.store.replace(found[1], content)
            if token is not None:
                log.warning(
                    f"took over the stale lease of {other.describe(now)}"
                    if other
                    else "took over a damaged lease"
                )
                return self._held(token)
        raise LeaseError(
            f"lakehouse {self.where}: other runs keep taking its lease",
            fix="run one pipeline per lakehouse at a time",
        )

    def release(self) -> None:
        """Stop the heartbeat and delete the lease. A store that keeps failing the delete
        leaves it behind, said in the log: it goes stale after the TTL (at once for a taker
        in the same process space once this process is gone); the run's result stands."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        token, self._token = self._token, None
        if token is None:
            return
        for attempt in range(RELEASE_ATTEMPTS):
            try:
                self.store.delete(token)
                return
            except Exception as error:  # any store error: OSError, boto3's ClientError, …
                if attempt + 1 == RELEASE_ATTEMPTS:
                    log.warning(
                        f"could not release the lease on lakehouse {self.where} ({error}); it "
                        f"goes stale {self.ttl:.0f}s after its last heartbeat"
                    )
                else:
                    time.sleep(0.2 * 2**attempt)

    def _held(self, token: str) -> None:
        self._token = token
        self._thread = threading.Thread(target=self._beat, name="lakefeed-lease", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            renewed = replace(self.holder, heartbeat=time.time())
            content = renewed.encode()
            try:
                kept = self.store.replace(self._token, content) if self._token else None
            except Exception:  # any store error: OSError, boto3's ClientError, …
                log.exception("could not renew the lakehouse lease; trying again")
                continue
            if kept is None:
                self._token = None
                message = f"the lease on lakehouse {self.where} was taken over by another run"
                log.error(message)
                if self.on_lost is not None:
                    self.on_lost(message)
                return
            self._token = kept
