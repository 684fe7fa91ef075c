"""One writer per lakehouse: a pipeline run holds a lease on its lakehouse folder.

Two runs on the same lakehouse would both start: their flows would fight over the same
checkpoints and tables, restart each other, and remove each other's staging files, with only
Spark's and Delta's conflict checks between them and lost data. So a run first takes the lease
``<lakehouse>/_lakefeed_lease.json`` (holder host, pid, run id, pipeline, since, heartbeat); a
second run is refused before anything starts, naming the holder. A heartbeat thread renews the
lease; the run releases it at exit. A lease whose holder died is *stale* — its pid is gone on
this host, or its heartbeat is older than the TTL (any host) — and the next run takes it over.
Read-only commands (``status``, ``events``, ``ui``, ``validate``, ``verify --no-run``) never
take it.

Every change is conditional, so two runs can never both believe they hold the lease: it is
created only if absent, and replaced (heartbeat, takeover) or deleted (release) only if it is
still exactly the version the caller read. :class:`LeaseStore` is that contract.
:class:`LocalLeaseStore` keeps it on a local disk (an atomic hard link creates the file only
when it is absent, like ``O_CREAT|O_EXCL`` but with the content complete; compare-and-replace
runs under an ``flock`` that the kernel releases when its holder dies). On object storage the
same contract is a conditional PUT — ``If-None-Match: *`` to create, ``If-Match: <ETag>`` to
replace — and a conditional DELETE, with the ETag as the version token.
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
from typing import Protocol

from lakefeed.errors import LeaseError
from lakefeed.lakehouse import Lakehouse
from lakefeed.logs import get_logger
from lakefeed.storage import AnyPath, ObjectPath

log = get_logger(__name__)

TTL_S = 60.0
"""A lease whose heartbeat is older than this is stale, whatever host holds it."""
HEARTBEAT_S = 10.0


class LeaseStore(Protocol):
    """Where a lease lives; every write is conditional (see the module docstring)."""

    def create(self, content: bytes) -> bool:
        """Write ``content`` only if no lease exists; False when one does."""
        ...

    def read(self) -> tuple[bytes, str] | None:
        """The lease and its version token, None when there is none."""
        ...

    def replace(self, token: str, content: bytes) -> bool:
        """Write ``content`` only if the lease is still at version ``token``."""
        ...

    def delete(self, token: str) -> bool:
        """Remove the lease only if it is still at version ``token``."""
        ...


@dataclass(frozen=True)
class LocalLeaseStore:
    """A lease file on a local disk (POSIX hard links and ``flock``)."""

    path: Path

    def create(self, content: bytes) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}.tmp")
        temporary.write_bytes(content)
        try:
            os.link(temporary, self.path)  # fails if the lease exists: one creator wins
            return True
        except FileExistsError:
            return False
        finally:
            temporary.unlink()

    def read(self) -> tuple[bytes, str] | None:
        return _read(self.path)

    def replace(self, token: str, content: bytes) -> bool:
        with self._locked():
            found = self.read()
            if found is None or found[1] != token:
                return False
            temporary = self.path.with_name(f"{self.path.name}.{uuid.uuid4().hex}.tmp")
            temporary.write_bytes(content)
            os.replace(temporary, self.path)
            return True

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
    """A lease object in an S3 bucket, through :mod:`lakefeed.storage` (pyarrow's S3 client).

    pyarrow cannot send S3's conditional headers, so each change reads, compares the version
    token and writes, then reads back: two runs starting within the same second could both
    pass the check, and the later write wins (the loser sees it at its next heartbeat and
    stops). Exactly-once still holds then: each Delta commit is conditional (delta-rs puts log
    files with ``If-None-Match``) and a replayed batch is skipped by its ``txn``.
    """

    path: ObjectPath

    def create(self, content: bytes) -> bool:
        if self.read() is not None:
            return False
        self.path.write_bytes(content)
        return self.path.read_bytes() == content

    def read(self) -> tuple[bytes, str] | None:
        return _read(self.path)

    def replace(self, token: str, content: bytes) -> bool:
        found = self.read()
        if found is None or found[1] != token:
            return False
        self.path.write_bytes(content)
        return True

    def delete(self, token: str) -> bool:
        found = self.read()
        if found is None or found[1] != token:
            return False
        self.path.unlink(missing_ok=True)
        return True


def lease_store(path: AnyPath) -> LeaseStore:
    """The store for a lease at ``path``: a local file or an object in a bucket."""
    return ObjectLeaseStore(path) if isinstance(path, ObjectPath) else LocalLeaseStore(path)


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
    """Who holds a lease, since when, and when it last said it was alive (epoch seconds)."""

    host: str
    pid: int
    run_id: str
    pipeline: str
    since: float
    heartbeat: float

    def encode(self) -> bytes:
        return json.dumps(asdict(self), indent=2).encode()

    @classmethod
    def decode(cls, content: bytes) -> Holder | None:
        """The holder, or None for content no run could have written (a damaged lease)."""
        try:
            data = json.loads(content)
            return cls(
                str(data["host"]),
                int(data["pid"]),
                str(data["run_id"]),
                str(data["pipeline"]),
                float(data["since"]),
                float(data["heartbeat"]),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def stale(self, now: float, ttl: float) -> bool:
        if now - self.heartbeat > ttl:
            return True
        return self.host == socket.gethostname() and not _alive(self.pid)

    def describe(self, now: float) -> str:
        return (
            f"run {self.run_id} of pipeline {self.pipeline!r}, pid {self.pid} on host "
            f"{self.host}, since {_iso(self.since)} (last heartbeat {now - self.heartbeat:.0f}s "
            "ago)"
        )


def _refuse_if_live(holder: Holder | None, now: float, ttl: float, where: str) -> None:
    if holder is not None and not holder.stale(now, ttl):
        raise LeaseError(
            f"lakehouse {where} is in use by {holder.describe(now)}",
            fix=f"wait for that run to end, or stop it (kill {holder.pid} on {holder.host}); a "
            "run that died frees the lakehouse by itself (at once on the same host, "
            f"{ttl:.0f}s after its last heartbeat from another)",
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
        now = time.time()
        self.holder = Holder(socket.gethostname(), os.getpid(), run_id, pipeline, now, now)
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
            if self.store.create(content):
                return self._held(content)
            found = self.store.read()
            if found is None:
                continue  # released meanwhile
            now = time.time()
            other = Holder.decode(found[0])
            _refuse_if_live(other, now, self.ttl, self.where)
            if self.store.replace(found[1], content):
                log.warning(
                    f"took over the stale lease of {other.describe(now)}"
                    if other
                    else "took over a damaged lease"
                )
                return self._held(content)
        raise LeaseError(
            f"lakehouse {self.where}: other runs keep taking its lease",
            fix="run one pipeline per lakehouse at a time",
        )

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._token is not None:
            self.store.delete(self._token)
            self._token = None

    def _held(self, content: bytes) -> None:
        self._token = _token(content)
        self._thread = threading.Thread(target=self._beat, name="lakefeed-lease", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            renewed = replace(self.holder, heartbeat=time.time())
            content = renewed.encode()
            try:
                kept = self._token is not None and self.store.replace(self._token, content)
            except OSError:
                log.exception("could not renew the lakehouse lease; trying again")
                continue
            if not kept:
                self._token = None
                message = f"the lease on lakehouse {self.where} was taken over by another run"
                log.error(message)
                if self.on_lost is not None:
                    self.on_lost(message)
                return
            self._token = _token(content)
