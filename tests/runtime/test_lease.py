"""One run per lakehouse: the lease is refused to a second run, renewed, taken over when stale."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lakefeed.core.errors import LeaseError, code_of
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.runtime.lease import Holder, Lease, LocalLeaseStore, check_free, process_space
from tests.pipeline.support import IOT, IOT_CONF
from tests.support.crash import DRIVER_JVM


def _lease(lakehouse: Lakehouse, run_id: str, **kwargs: object) -> Lease:
    store = LocalLeaseStore(lakehouse.lease_path)
    return Lease(store, run_id, "iot", where=str(lakehouse.root), **kwargs)  # type: ignore[arg-type]


def _write_holder(lakehouse: Lakehouse, **fields: object) -> None:
    now = time.time()
    holder = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "run_id": "old",
        "pipeline": "iot",
        "since": now - 600,
        "heartbeat": now,
        **fields,
    }
    lakehouse.root.mkdir(parents=True, exist_ok=True)
    lakehouse.lease_path.write_text(json.dumps(holder))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_second_run_is_refused_naming_the_holder(lakehouse: Lakehouse) -> None:
    first = _lease(lakehouse, "first")
    first.acquire()
    with pytest.raises(LeaseError) as refused:
        _lease(lakehouse, "second").acquire()
    text = str(refused.value)
    assert code_of(text) == "LEASE_HELD" and refused.value.permanent
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in text
    assert "run first" in text and "since 20" in text and "kill" in str(refused.value.fix)
    with pytest.raises(LeaseError):
        check_free(lakehouse)  # the CLI's early answer, before a Spark session starts
    first.release()
    assert not lakehouse.lease_path.exists()
    check_free(lakehouse)
    with _lease(lakehouse, "second"):
        assert Holder.decode(lakehouse.lease_path.read_bytes()).run_id == "second"  # type: ignore[union-attr]


def test_stale_leases_are_taken_over(lakehouse: Lakehouse) -> None:
    _write_holder(lakehouse, pid=_dead_pid(), space=process_space())  # the process is gone
    with _lease(lakehouse, "after-crash"):
        pass
    _write_holder(lakehouse, host="elsewhere", heartbeat=time.time() - 120)  # silent for 2 min
    with _lease(lakehouse, "after-silence"):
        pass
    lakehouse.lease_path.write_text("{not json")  # damaged: no run could hold it
    with _lease(lakehouse, "after-damage"):
        pass
    # Another host's pid says nothing here: a fresh heartbeat keeps its lease.
    _write_holder(lakehouse, host="elsewhere", pid=_dead_pid())
    with pytest.raises(LeaseError, match="on host elsewhere"):
        _lease(lakehouse, "refused").acquire()


def test_only_one_of_many_takers_wins_a_stale_lease(lakehouse: Lakehouse) -> None:
    for _ in range(10):
        _write_holder(lakehouse, pid=_dead_pid(), space=process_space())
        takers = [_lease(lakehouse, f"taker-{i}") for i in range(6)]
        start = threading.Barrier(len(takers))
        won: list[Lease] = []

        threads = [threading.Thread(target=_take, args=(t, start, won)) for t in takers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1
        holder = Holder.decode(lakehouse.lease_path.read_bytes())
        assert holder is not None and holder.run_id == won[0].holder.run_id
        won[0].release()


def _take(lease: Lease, start: threading.Barrier, won: list[Lease]) -> None:
    start.wait()
    with contextlib.suppress(LeaseError):
        lease.acquire()
        won.append(lease)


def test_a_pid_counts_only_in_its_own_process_space(lakehouse: Lakehouse) -> None:
    """Containers share hostnames, not PID namespaces: a pid from another space (or from a
    lease that does not say its space) proves nothing, and a recycled pid is a dead holder."""
    mine = process_space()
    assert mine is not None
    for space in ("another-boot/pid:[1]", None):
        _write_holder(lakehouse, pid=_dead_pid(), space=space)  # same hostname, other space
        with pytest.raises(LeaseError, match="LEASE_HELD"):
            _lease(lakehouse, "refused").acquire()
    # Our space, a live pid, but not the process that wrote the lease (another start time).
    _write_holder(lakehouse, pid=os.getppid(), space=mine, started=1)
    with _lease(lakehouse, "after-recycled-pid"):
        pass
    # Our own live process, as recorded: held.
    with _lease(lakehouse, "holder"), pytest.raises(LeaseError, match="LEASE_HELD"):
        _lease(lakehouse, "second").acquire()


TAKER = """
import sys, os
from lakefeed.core.errors import LeaseError, code_of
from lakefeed.runtime.lease import Lease, LocalLeaseStore
store = LocalLeaseStore(__import__("pathlib").Path(sys.argv[1]))
try:
    Lease(store, "container", "iot", where="lh", ttl=float(sys.argv[2])).acquire()
    print("TOOK", os.getpid())
except LeaseError as error:
    print(code_of(str(error)), os.getpid())
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root's unshare")
def test_a_run_in_another_pid_namespace_does_not_take_a_live_lease(
    lakehouse: Lakehouse, tmp_path: Path
) -> None:
    """A second run started in a new PID namespace with the same hostname (a container) is
    refused while the holder's heartbeat is fresh; after the holder falls silent it takes over."""
    script = tmp_path / "taker.py"
    script.write_text(TAKER)

    def take(ttl: float) -> str:
        command = ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, str(script)]
        found = subprocess.run(
            [*command, str(lakehouse.lease_path), str(ttl)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).parents[2],
        )
        assert found.returncode == 0, found.stderr
        return found.stdout.split()[0]

    holder = _lease(lakehouse, "live", heartbeat=0.2)
    holder.acquire()
    try:
        assert take(ttl=60) == "LEASE_HELD"  # its pid is not in that namespace, yet it lives
    finally:
        holder._stop.set()  # falls silent without releasing, as a frozen container would
    time.sleep(1.2)
    assert take(ttl=1) == "TOOK"


def test_heartbeat_renews_and_a_takeover_stops_the_holder(lakehouse: Lakehouse) -> None:
    lost: list[str] = []
    lease = _lease(lakehouse, "beating", heartbeat=0.05, on_lost=lost.append)
    lease.acquire()
    first = Holder.decode(lakehouse.lease_path.read_bytes())
    time.sleep(0.5)
    renewed = Holder.decode(lakehouse.lease_path.read_bytes())
    assert first is not None and renewed is not None and renewed.heartbeat > first.heartbeat
    # Another run took the lease over (this one looked dead to it): the holder is told.
    store = LocalLeaseStore(lakehouse.lease_path)
    deadline = time.monotonic() + 5
    while not lost and time.monotonic() < deadline:
        found = store.read()
        assert found is not None
        store.replace(found[1], Holder("other", 1, "taker", "iot", 0, time.time()).encode())
        time.sleep(0.1)
    assert lost and "taken over" in lost[0]
    lease.release()
    assert Holder.decode(lakehouse.lease_path.read_bytes()).run_id == "taker"  # type: ignore[union-attr]


DRIVER = """
import sys
from lakefeed.cli.main import cli

args = ["run", {iot!r}, "--lakehouse", {lakehouse!r}, "--master", "local[1]",
        "--trigger-interval", "1 second"] + sys.argv[1:]
for key, value in {conf!r}.items():
    args += ["--conf", f"{{key}}={{value}}"]
cli(args, standalone_mode=True)
"""


@pytest.mark.crash
@pytest.mark.soak  # the lease's rules are proven in-process above; this replays them with kill -9
@pytest.mark.timeout(1500)
def test_two_real_runs_one_refused_then_a_killed_holder_is_taken_over(tmp_path: Path) -> None:
    lakehouse = Lakehouse.at(tmp_path / "lakehouse")
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(iot=str(IOT), lakehouse=str(lakehouse.root), conf=IOT_CONF))
    env = {**DRIVER_JVM, **os.environ, "PYSPARK_PYTHON": sys.executable}

    def run(mode: str, log: str, **kwargs: object) -> subprocess.Popen[bytes]:
        with (tmp_path / log).open("wb") as out:
            return subprocess.Popen(
                [sys.executable, str(driver), "--mode", mode],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                **kwargs,  # type: ignore[call-overload]
            )

    first = run("continuous", "first.log", start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and first.poll() is None:
            holder = lakehouse.lease_path.exists() and Holder.decode(
                lakehouse.lease_path.read_bytes()
            )
            if holder and holder.pid == first.pid:
                break
            time.sleep(0.5)
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
        second = run("once", "second.log")
        assert second.wait(timeout=600) == 2
        refusal = " ".join((tmp_path / "second.log").read_text().split())  # unwrapped
        assert "[LEASE_HELD]" in refusal and f"pid {first.pid} on host" in refusal
        assert first.poll() is None  # the holder runs on, untouched
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    # kill -9 left the lease behind; its pid is gone, so the next run takes it over
    assert Holder.decode(lakehouse.lease_path.read_bytes()).pid == first.pid  # type: ignore[union-attr]
    third = run("once", "third.log")
    assert third.wait(timeout=600) == 0, (tmp_path / "third.log").read_text()[-3000:]
    assert "took over the stale lease" in (tmp_path / "third.log").read_text()
    assert not lakehouse.lease_path.exists()
    # The same lakehouse after losing bronze's newest commit: the CLI refuses, exit 2.
    max((lakehouse.table_path("bronze_readings") / "_delta_log").glob("*.json")).unlink()
    fourth = run("once", "fourth.log")
    assert fourth.wait(timeout=600) == 2
    refusal = " ".join((tmp_path / "fourth.log").read_text().split())
    assert "table 'bronze_readings' is at version" in refusal and "[TABLE_BEHIND]" in refusal
    assert "--full-refresh bronze_readings,silver_readings,gold_device_5min" in refusal


class _FlakyStore(LocalLeaseStore):
    """A local lease whose delete fails ``failures`` times (a store answering SlowDown)."""

    failures = 0

    def delete(self, token: str) -> bool:
        if self.failures:
            self.failures -= 1
            raise OSError("SlowDown")
        return super().delete(token)


def test_a_release_the_store_fails_is_retried_then_left_to_go_stale(
    lakehouse: Lakehouse, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the fault harness: a failed delete used to fail the finished run with an
    uncoded error and keep the lakehouse locked for the rest of the process."""
    store = _FlakyStore(lakehouse.lease_path)
    store.failures = 2
    lease = Lease(store, "retried", "iot", where="lh", ttl=60)
    lease.acquire()
    lease.release()  # two failures, then the delete goes through
    assert not lakehouse.lease_path.exists()
    store.failures = 5
    lease = Lease(store, "left", "iot", where="lh", ttl=60)
    lease.acquire()
    lease.release()  # never raises
    assert lakehouse.lease_path.exists() and "could not release the lease" in caplog.text
