"""Fault plans: which storage operation fails, how, and when — the Spark-free core shared by the
S3 fault proxy (:mod:`tests.support.s3faults`) and the FUSE file system
(:mod:`tests.support.fusefaults`).

A :class:`Fault` picks the Nth operation of one kind (``read``, ``write``, ``copy``/``rename``,
``list``, ``delete``/``unlink``, ``head``), optionally only those whose key or path contains a
pattern (``_delta_log/``, ``checkpoints/``), and does something to it and the ``times - 1``
matching operations after it: ``fail`` (an HTTP 500/503 with an S3 error body, or ``EIO``),
``enospc`` (a full disk, writes only), ``delay`` (``delay`` seconds first) or ``truncate`` (a
read's body cut short, or a write that stores half its bytes and reports them all, as a torn
write does). Object stores' clients retry 5xx answers, so ``times`` decides whether a fault is
one that retries should absorb (1) or an outage the run has to survive (many).

The plan lives in a JSON file that the faulting process re-reads when it changes (a test swaps
faults without restarting the proxy or remounting), and every fault that fires is appended to
``<plan>.fired`` as a JSON line, so a finding names the exact operation that failed. Operation
counts go to ``<plan>.counts`` (what a clean run does: the soak picks N from them).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

S3_OPS = ("read", "write", "copy", "list", "delete", "head")
DISK_OPS = ("read", "write", "rename", "list", "unlink")
ACTIONS = ("fail", "enospc", "delay", "truncate")


@dataclass(frozen=True)
class Fault:
    op: str
    nth: int
    action: str = "fail"
    pattern: str = ""
    times: int = 1
    status: int = 503
    delay: float = 2.0

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r}: one of {ACTIONS}")
        if self.nth < 1 or self.times < 1:
            raise ValueError(f"nth and times count from 1: {self}")

    def label(self) -> str:
        where = f" ~{self.pattern}" if self.pattern else ""
        return f"{self.action} {self.op}#{self.nth}{where} x{self.times}"


def classify_s3(method: str, path: str, query: str, headers: dict[str, str]) -> str:
    """The kind of an S3 REST request (path-style: ``/bucket`` or ``/bucket/key``)."""
    has_key = "/" in path.strip("/")
    params = {part.split("=", 1)[0] for part in query.split("&") if part}
    if method == "HEAD":
        return "head"
    if method == "DELETE" or (method == "POST" and "delete" in params):
        return "delete"
    if method == "PUT" and any(k.lower() == "x-amz-copy-source" for k in headers):
        return "copy"
    if method in ("PUT", "POST"):
        return "write"
    if method == "GET" and not has_key:
        return "list"
    return "read"


@dataclass
class FaultPlan:
    """The faults of one run and the operations seen so far (thread-safe)."""

    faults: list[Fault] = field(default_factory=list)
    seen: Counter[tuple[int, str]] = field(default_factory=Counter)
    counts: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, op: str, key: str) -> Fault | None:
        """Count this operation; the fault it meets, if any."""
        with self.lock:
            self.counts[op] += 1
            for index, fault in enumerate(self.faults):
                if fault.op != op or (fault.pattern and fault.pattern not in key):
                    continue
                self.seen[(index, op)] += 1
                if fault.nth <= self.seen[(index, op)] < fault.nth + fault.times:
                    return fault
            return None


class PlanFile:
    """A :class:`FaultPlan` read from a JSON file, re-read whenever the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp: tuple[int, int] | None = None
        self.plan = FaultPlan()
        self.lock = threading.Lock()
        self.counts_written = 0.0

    def current(self) -> FaultPlan:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return self.plan
        stamp = (stat.st_mtime_ns, stat.st_size)
        with self.lock:
            if stamp != self.stamp:
                self.stamp = stamp
                data = json.loads(self.path.read_text() or "[]")
                self.plan = FaultPlan([Fault(**item) for item in data])
            return self.plan

    def decide(self, op: str, key: str) -> Fault | None:
        plan = self.current()
        fault = plan.decide(op, key)
        if fault is not None:
            record = {"fault": fault.label(), "op": op, "key": key, "at": time.time()}
            with open(f"{self.path}.fired", "a") as out:
                out.write(json.dumps(record) + "\n")
        if time.monotonic() - self.counts_written > 0.5:
            self.write_counts(plan)
        return fault

    def write_counts(self, plan: FaultPlan | None = None) -> None:
        self.counts_written = time.monotonic()
        counts = dict((plan or self.plan).counts)
        tmp = f"{self.path}.counts.tmp"
        Path(tmp).write_text(json.dumps(counts))
        os.replace(tmp, f"{self.path}.counts")


def set_plan(path: Path, faults: Sequence[Fault]) -> None:
    """Arm ``faults`` (counting anew) for the process serving ``path``; clears its fired log."""
    for suffix in (".fired", ".counts"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps([asdict(fault) for fault in faults]))
    os.replace(tmp, path)


def fired(path: Path) -> list[dict[str, object]]:
    log = Path(f"{path}.fired")
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def counts(path: Path) -> dict[str, int]:
    log = Path(f"{path}.counts")
    return json.loads(log.read_text()) if log.exists() else {}


def random_fault(rng: random.Random, layer: str, counts: dict[str, int]) -> Fault:
    """A fault a clean run with these operation counts would meet (N within the count)."""
    ops = [op for op in (S3_OPS if layer == "s3" else DISK_OPS) if counts.get(op, 0) > 0]
    op = rng.choice(ops)
    pattern = rng.choice(["", "", "_delta_log/", "checkpoints/"])
    actions = ["fail", "fail", "delay"]
    if op == "read" or (op == "write" and layer == "disk"):  # a body or a write cut short
        actions.append("truncate")
    if op == "write" and layer == "disk":
        actions.append("enospc")
    action = rng.choice(actions)
    nth = rng.randint(1, max(1, counts[op] // (3 if pattern else 1)))
    times = 1 if action in ("delay", "truncate") else rng.choice([1, 3, 1000])
    return Fault(op, nth, action, pattern, times, rng.choice([500, 503]), rng.uniform(0.5, 4))
