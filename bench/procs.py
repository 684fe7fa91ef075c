"""What a process tree uses, read from Linux's ``/proc`` (no psutil in the environment).

A lakefeed run is three kinds of processes: the Python driver (this process), the JVM it
starts (a child), and the JVM's Python workers (its children, running ``pyspark.daemon`` or
``pyspark.worker``). The benches sample each kind's memory, threads, open files and CPU time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    """Totals over the processes of one kind."""

    processes: int = 0
    rss_bytes: int = 0
    threads: int = 0
    open_files: int = 0
    cpu_seconds: float = 0.0

    def add(self, other: Usage) -> None:
        self.processes += other.processes
        self.rss_bytes += other.rss_bytes
        self.threads += other.threads
        self.open_files += other.open_files
        self.cpu_seconds += other.cpu_seconds


@dataclass
class TreeUsage:
    """The driver, its JVM and the Python workers, each summed."""

    driver: Usage = field(default_factory=Usage)
    jvm: Usage = field(default_factory=Usage)
    workers: Usage = field(default_factory=Usage)

    @property
    def cpu_seconds(self) -> float:
        return self.driver.cpu_seconds + self.jvm.cpu_seconds + self.workers.cpu_seconds


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children


def usage(pid: int) -> Usage:
    """One process's RSS, threads, open file descriptors and CPU seconds (zero when gone)."""
    root = Path(f"/proc/{pid}")
    try:
        fields = (root / "stat").read_text().rsplit(")", 1)[1].split()
        rss_pages = int((root / "statm").read_text().split()[1])
        files = len(os.listdir(root / "fd"))
    except OSError:
        return Usage()
    # after the command's ")": state ppid ... utime(12) stime(13) ... num_threads(18)
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS
    return Usage(1, rss_pages * _PAGE, int(fields[17]), files, cpu)


def _kind(pid: int) -> str:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return "gone"
    if b"java" in command.split(b" ", 1)[0]:
        return "jvm"
    if b"pyspark" in command or b"daemon" in command or b"worker" in command:
        return "workers"
    return "other"


def tree_usage(root: int | None = None) -> TreeUsage:
    """Sum the tree under ``root`` (default: this process) by kind."""
    root = os.getpid() if root is None else root
    children = _children()
    result = TreeUsage()
    result.driver.add(usage(root))
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, []))
        kind = _kind(pid)
        if kind == "jvm":
            result.jvm.add(usage(pid))
        elif kind == "workers":
            result.workers.add(usage(pid))
    return result
