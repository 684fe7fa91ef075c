"""A FUSE passthrough file system that injects faults into a local lakehouse.

Mounted over a backing folder (libfuse 3 through ``mfusepy``), it passes every call through and
asks a :class:`~tests.support.faults.PlanFile` about the data-path calls: ``read``, ``write``,
``rename``, ``list`` (readdir) and ``unlink``. A fault answers ``EIO`` (``fail``), ``ENOSPC``
(``enospc``, writes), sleeps first (``delay``), or tears a write: half the bytes are stored and
all of them reported written (``truncate``), as a crash with a lying disk cache leaves them.

It runs in its own process (``python -m tests.support.fusefaults``) and is mounted and
unmounted by :class:`FaultMount`: a process must never serve its own file system calls.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.faults import Fault, PlanFile

FUSE_DEVICE = Path("/dev/fuse")
AT_FDCWD = -100
STAT_FIELDS = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size",
               "st_uid")  # fmt: skip


def fuse_missing() -> str | None:
    """Why FUSE cannot be used here, or None."""
    if not FUSE_DEVICE.exists():
        return "/dev/fuse is missing (a container without the FUSE device)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing: apt-get install fuse3 (./dev setup does)"
    return None


def _operations(root: str, plan: PlanFile) -> Any:  # noqa: ANN401 - mfusepy is untyped
    from mfusepy import FuseOSError, Operations

    def check(op: str, path: str) -> Fault | None:
        fault = plan.decide(op, path)
        if fault is None:
            return None
        if fault.action == "delay":
            time.sleep(fault.delay)
        elif fault.action == "fail":
            raise FuseOSError(errno.EIO)
        elif fault.action == "enospc":
            raise FuseOSError(errno.ENOSPC)
        return fault

    class Passthrough(Operations):  # type: ignore[misc]
        """The backing folder as it is, with :func:`check` on the data path."""

        def __call__(self, op: str, path: str, *args: Any) -> Any:  # noqa: ANN401
            return super().__call__(op, path, *args)

        def real(self, path: str) -> str:
            return root + path

        def access(self, path: str, mode: int) -> None:
            if not os.access(self.real(path), mode):
                raise FuseOSError(errno.EACCES)

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(self.real(path), mode)

        def chown(self, path: str, uid: int, gid: int) -> None:
            os.chown(self.real(path), uid, gid)

        def create(self, path: str, mode: int, fi: Any = None) -> int:  # noqa: ANN401
            return os.open(self.real(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)

        def open(self, path: str, flags: int) -> int:
            return os.open(self.real(path), flags)

        def flush(self, path: str, fh: int) -> None:
            pass

        def fsync(self, path: str, datasync: int, fh: int) -> None:
            os.fsync(fh)

        def release(self, path: str, fh: int) -> None:
            os.close(fh)

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            st = os.lstat(self.real(path))
            return {key: getattr(st, key) for key in STAT_FIELDS}

        def statfs(self, path: str) -> dict[str, Any]:
            st = os.statvfs(self.real(path))
            return {key: getattr(st, key) for key in dir(st) if key.startswith("f_")}

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(self.real(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(self.real(path))

        def readdir(self, path: str, fh: int) -> list[str]:
            check("list", path)
            return [".", "..", *os.listdir(self.real(path))]

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            fault = check("read", path)
            data = os.pread(fh, size, offset)
            return (
                data[: len(data) // 2] if fault is not None and fault.action == "truncate" else data
            )

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            fault = check("write", path)
            if fault is not None and fault.action == "truncate":
                os.pwrite(fh, data[: len(data) // 2], offset)
                return len(data)
            return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            os.truncate(self.real(path) if fh is None else fh, length)

        def rename(self, old: str, new: str, flags: int = 0) -> None:
            check("rename", old)
            _renameat2(self.real(old), self.real(new), flags)

        def link(self, target: str, source: str) -> None:
            os.link(self.real(source), self.real(target))

        def unlink(self, path: str) -> None:
            check("unlink", path)
            os.unlink(self.real(path))

        def utimens(self, path: str, times: tuple[float, float] | None = None) -> None:
            os.utime(self.real(path), times)

        def symlink(self, target: str, source: str) -> None:
            os.symlink(source, self.real(target))

        def readlink(self, path: str) -> str:
            return os.readlink(self.real(path))

    return Passthrough()


def _renameat2(old: str, new: str, flags: int) -> None:
    """rename(2) with its flags kept: delta-rs commits a log entry by RENAME_NOREPLACE, and a
    pass-through that dropped the flag would let a commit overwrite another."""
    if flags == 0:
        os.rename(old, new)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(AT_FDCWD, old.encode(), AT_FDCWD, new.encode(), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), old)


def _fuse(operations: Any, mountpoint: str) -> None:  # noqa: ANN401 - mfusepy is untyped
    """Serve ``operations`` at ``mountpoint`` until unmounted; rename's flags reach them."""
    from mfusepy import FUSE

    class FlagsFUSE(FUSE):  # type: ignore[misc]
        def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
            return int(self.operations.rename(old.decode(), new.decode(), flags) or 0)

    FlagsFUSE(operations, mountpoint, foreground=True, nothreads=False)


class FaultMount:
    """``mountpoint`` shows ``backing`` through the fault file system until :meth:`unmount`."""

    def __init__(self, backing: Path, mountpoint: Path, plan: Path, log: Path) -> None:
        self.backing, self.mountpoint, self.plan, self.log = backing, mountpoint, plan, log
        self.proc: subprocess.Popen[bytes] | None = None

    def mount(self) -> FaultMount:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "tests.support.fusefaults", str(self.backing),
                   str(self.mountpoint), str(self.plan)]  # fmt: skip
        root = Path(__file__).resolve().parents[2]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=out, cwd=root)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if os.path.ismount(self.mountpoint):
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.unmount()
        raise RuntimeError(f"the FUSE fault file system did not mount: {self.log.read_text()}")

    def unmount(self) -> None:
        if os.path.ismount(self.mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def mounted_or_skip(folder: Path) -> Iterator[FaultMount]:
    """A fault file system mounted in ``folder`` (a test's tmp_path) for the ``with`` block; the
    test is skipped where FUSE cannot be used."""
    import pytest  # the test runner, only when a test mounts

    reason = fuse_missing()
    if reason is not None:
        pytest.skip(reason)
    mount = FaultMount(folder / "back", folder / "mnt", folder / "plan.json",
                       folder / "fuse.log").mount()  # fmt: skip
    try:
        yield mount
    finally:
        mount.unmount()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("plan", type=Path)
    args = parser.parse_args()
    _fuse(_operations(str(args.backing.resolve()), PlanFile(args.plan)), str(args.mountpoint))


if __name__ == "__main__":
    main()
