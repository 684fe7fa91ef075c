"""Fault trials: one pipeline, one injected storage fault (or a kill -9), a restart, a verdict.

A trial starts a fresh lakehouse on the chosen layer (``s3``: moto behind the fault proxy;
``disk``: a folder behind the FUSE fault file system), arms one fault, runs ``lakefeed run
--mode available-now`` as a subprocess (a ``kill`` trial SIGKILLs it at a random moment), then
disarms it and runs ``lakefeed verify`` (which catches up first, then compares each table with a
batch recompute). Last, the rows are counted against the known input: each input row must be
there exactly once. The verdict (:class:`Outcome`) is ``survived``, ``refused`` (a coded error
after the fault: judge whether it came before writing and names a fix) or a finding: ``lost``,
``duplicated``, ``traceback`` (a raw Python or JVM trace in front of the user), ``crash`` (an
exit without a code), ``differs`` (verify found a difference) or ``hung``.

Shared by the CI sample (tests/system/faults) and the soak (``python -m bench.faults``).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from deltalake import DeltaTable
from pyspark.sql import SparkSession

import lakefeed as lf
from lakefeed.core.errors import LakefeedError
from lakefeed.pipeline.api import set_config
from lakefeed.runtime.results import TableComparison
from tests.pipeline.support import IOT_CONF as PIPELINE_IOT_CONF
from tests.support.crash import DRIVER_JVM
from tests.support.faults import Fault, counts, fired, set_plan
from tests.support.fusefaults import FaultMount, fuse_missing
from tests.support.s3 import MotoServer
from tests.support.s3faults import S3FaultProxy

ROOT = Path(__file__).resolve().parents[2]
CODE = re.compile(r"\[LAKEFEED:([A-Z0-9_]+)\]")
RAW_TRACE = re.compile(r"Traceback \(most recent call last\)|^\s+at (?:org|java|scala)\.", re.M)
RUN_TIMEOUT = 300.0
IOT_CONF = {**PIPELINE_IOT_CONF, "iot.maxRowsPerTrigger": "500"}


@dataclass(frozen=True)
class Count:
    """Rows of one table against the input: distinct keys found, rows found, keys expected."""

    table: str
    expected: int
    rows: int
    distinct: int

    @property
    def lost(self) -> int:
        return self.expected - self.distinct

    @property
    def duplicated(self) -> int:
        return self.rows - self.distinct


@dataclass
class Run:
    code: int | None  # None: killed
    output: str
    seconds: float


@dataclass
class Outcome:
    scenario: str
    layer: str
    seed: int
    fault: str
    verdict: str
    first: Run
    second: Run | None
    counts: list[Count] = field(default_factory=list)
    fired: list[dict[str, object]] = field(default_factory=list)
    ops: dict[str, int] = field(default_factory=dict)  # operations the first run made

    @property
    def finding(self) -> bool:
        return self.verdict not in ("survived", "refused")

    def excerpt(self) -> str:
        """The lines a reader needs: coded errors and the start of any raw trace."""
        text = "\n".join(r.output for r in (self.first, self.second) if r is not None)
        lines = text.splitlines()
        keep = [i for i, line in enumerate(lines) if CODE.search(line) or RAW_TRACE.search(line)]
        picked = sorted({j for i in keep[:6] for j in range(max(0, i - 1), min(len(lines), i + 3))})
        return "\n".join(lines[j][:300] for j in picked) or "\n".join(lines[-8:])

    def summary(self) -> str:
        rows = ", ".join(f"{c.table}: lost {c.lost} dup {c.duplicated}" for c in self.counts)
        return (
            f"{self.verdict:10} {self.scenario}/{self.layer} seed={self.seed} {self.fault} | {rows}"
        )


@dataclass
class Lab:
    """The servers of a set of trials: moto, its fault proxy, the FUSE mount, a Kafka broker."""

    workdir: Path
    moto: MotoServer
    proxy: S3FaultProxy
    mount: FaultMount | None
    broker: object | None = None
    bucket: str = ""
    topics: dict[str, object] = field(default_factory=dict)

    def plan(self, layer: str) -> Path:
        if layer == "s3":
            return self.proxy.plan
        assert self.mount is not None, fuse_missing()
        return self.mount.plan

    def s3_env(self) -> dict[str, str]:
        """S3 through the proxy (disarmed, it passes everything on)."""
        return {**self.moto.env(), "AWS_ENDPOINT_URL": self.proxy.endpoint}

    def env(self) -> dict[str, str]:
        """A driver subprocess's environment."""
        return {**os.environ, **DRIVER_JVM, **self.s3_env(), "PYSPARK_PYTHON": sys.executable}

    def fresh_lakehouse(self, layer: str) -> tuple[str, str]:
        """(where the pipeline writes, where this process reads it back without faults)."""
        name = f"lh-{uuid.uuid4().hex[:8]}"
        if layer == "s3":
            uri = f"s3://{self.bucket}/{name}"
            return uri, uri
        assert self.mount is not None, fuse_missing()
        return str(self.mount.mountpoint / name), str(self.mount.backing / name)


@contextlib.contextmanager
def lab(workdir: Path, broker: object | None = None) -> Iterator[Lab]:
    """Start moto, the proxy and (where FUSE works) the mount; stop them all after."""
    moto = MotoServer(workdir / "moto.log").start()
    proxy = S3FaultProxy(moto.endpoint, workdir / "s3-plan.json", workdir / "proxy.log")
    mount = None
    try:
        proxy.start()
        if fuse_missing() is None:
            mount = FaultMount(
                workdir / "backing",
                workdir / "mnt",
                workdir / "disk-plan.json",
                workdir / "fuse.log",
            ).mount()
        started = Lab(workdir, moto, proxy, mount, broker, moto.bucket("faults"))
        saved = {k: os.environ.get(k) for k in started.s3_env()}
        os.environ.update(started.s3_env())  # in-process runs and read-backs use the proxy too
        yield started
    finally:
        for key, value in locals().get("saved", {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if mount is not None:
            mount.unmount()
        proxy.stop()
        moto.stop()


@dataclass(frozen=True)
class Scenario:
    """A pipeline, its configuration, how to feed it and how to count its rows."""

    name: str
    pipeline: Path
    conf: Callable[[Lab, str], dict[str, str]]
    count: Callable[[Lab, str, dict[str, str]], list[Count]]
    needs_broker: bool = False


Driver = Callable[[Lab, str, list[str], "float | None"], Run]


def cli(lab: Lab, layer: str, args: list[str], kill_after: float | None = None) -> Run:
    """``lakefeed ARGS`` as an operator runs it; SIGKILL (whole process group) after
    ``kill_after`` seconds, or after :data:`RUN_TIMEOUT`."""
    log = lab.workdir / f"run-{uuid.uuid4().hex[:8]}.log"
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from lakefeed.cli.main import cli; cli()", *args],
            env=lab.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=lab.workdir,
            start_new_session=True,
        )
    code: int | None = None
    try:
        code = proc.wait(timeout=kill_after or RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        pass
    finally:  # a kill, a timeout, or this process interrupted: never leave a driver behind
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = log.read_text(errors="replace")
    log.unlink()
    return Run(code, output, time.monotonic() - started)


def in_process(spark: SparkSession) -> Driver:
    """A driver calling ``lf.run`` / ``lf.verify`` on ``spark`` (no JVM start per run; no
    kills): an exception is reported as the CLI reports it, one line with its code if it has one
    (an uncoded failure of the restart is a ``crash``)."""

    def drive(lab: Lab, layer: str, args: list[str], kill_after: float | None = None) -> Run:
        assert kill_after is None, "an in-process run cannot be killed"
        command, pipeline, lakehouse, conf = _parse(args)
        started = time.monotonic()
        try:
            if command == "run":
                result = lf.run(pipeline, lakehouse=lakehouse, conf=conf, spark=spark)
                lines = [f"run: {result.reason}"]
                lines += [f"{f.name}: {f.status} {f.error or ''}" for f in result.flows]
                shown = {f.name for f in result.flows}  # append and sink flows have no row
                lines += [f"{n}: failed {e}" for n, e in result.errors.items() if n not in shown]
                return Run(0 if result.ok else 1, "\n".join(lines), time.monotonic() - started)
            checked = lf.verify(pipeline, lakehouse=lakehouse, conf=conf, spark=spark)
            lines = [f"{t.table}: {_verdict(t)} {t.note} {t.inconsistent}" for t in checked.tables]
            same = all(_verdict(t) != "DIFFERENT" for t in checked.tables)
            return Run(0 if same else 1, "\n".join(lines), time.monotonic() - started)
        except LakefeedError as error:
            return Run(1, str(error), time.monotonic() - started)
        except Exception as error:  # noqa: BLE001 - uncoded: a crash if the restart ends so
            headline = (str(error).strip().splitlines() or [""])[0][:500]
            text = f"error: {type(error).__name__}: {headline}"  # as the CLI prints it
            return Run(1, text, time.monotonic() - started)
        finally:
            set_config({})

    return drive


def _verdict(table: TableComparison) -> str:
    """As ``lakefeed verify`` prints it; a table it cannot recompute (an AUTO CDC target) is
    NOT VERIFIED, which the row counts then judge."""
    if table.equal or table.excluded:
        return "equal"
    return "NOT VERIFIED" if not table.verified and not table.inconsistent else "DIFFERENT"


def _parse(args: list[str]) -> tuple[str, str, str, dict[str, str]]:
    """(command, pipeline, lakehouse, conf) back from :func:`common_args`' list."""
    conf = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")
    return args[0], args[1], args[args.index("--lakehouse") + 1], conf


def common_args(scenario: Scenario, lakehouse: str, conf: dict[str, str]) -> list[str]:
    args = [str(scenario.pipeline), "--lakehouse", lakehouse, "--master", "local[2]",
            "--spark-conf", "spark.ui.enabled=false",
            "--spark-conf", "spark.sql.shuffle.partitions=2"]  # fmt: skip
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def trial(
    lab: Lab, scenario: Scenario, layer: str, fault: Fault | None, seed: int,
    kill_after: float | None = None, drive: Driver = cli,
) -> Outcome:  # fmt: skip
    """One fault (or, with ``kill_after``, one kill -9 of a ``lakefeed run`` subprocess), a
    restart with ``verify``, a verdict; ``drive`` runs the pipeline (:func:`cli` or
    :func:`in_process`)."""
    lakehouse, readback = lab.fresh_lakehouse(layer)
    conf = scenario.conf(lab, lakehouse)
    args = common_args(scenario, lakehouse, conf)
    plan = lab.plan(layer)
    set_plan(plan, [fault] if fault is not None else [])
    first = (cli if kill_after is not None else drive)(
        lab, layer, ["run", *args, "--mode", "available-now"], kill_after
    )
    hits, ops = fired(plan), counts(plan)
    set_plan(plan, [])
    label = fault.label() if fault is not None else "no fault"
    label = f"kill -9 after {kill_after:.1f}s" if kill_after is not None else label
    outcome = Outcome(scenario.name, layer, seed, label, "hung", first, None, fired=hits, ops=ops)
    if kill_after is None and first.code is None:
        return outcome
    outcome.second = drive(lab, layer, ["verify", *args], None)
    outcome.counts = _counts(scenario, lab, readback, conf)
    outcome.verdict = verdict(outcome)
    if not outcome.finding:
        _remove(lab, layer, readback)
    return outcome


def _counts(scenario: Scenario, lab: Lab, readback: str, conf: dict[str, str]) -> list[Count]:
    try:
        return scenario.count(lab, readback, conf)
    except Exception as error:  # noqa: BLE001 - an unreadable table is the finding itself
        return [Count(f"unreadable: {type(error).__name__}: {str(error)[:200]}", 1, 0, 0)]


def verdict(outcome: Outcome) -> str:
    """survived / refused, or the finding (see the module docstring)."""
    runs = [r for r in (outcome.first, outcome.second) if r is not None]
    second = outcome.second
    assert second is not None
    if any(RAW_TRACE.search(r.output) for r in runs):
        return "traceback"
    if any(c.duplicated > 0 for c in outcome.counts):
        return "duplicated"
    if "DIFFERENT" in second.output:
        return "differs"
    unverified_only = "NOT VERIFIED" in second.output and not CODE.search(second.output)
    if second.code != 0 and not unverified_only:
        return "refused" if CODE.search(second.output) else "crash"
    if any(c.lost > 0 for c in outcome.counts):
        return "lost"
    return "survived"


def _remove(lab: Lab, layer: str, readback: str) -> None:
    if layer == "disk":
        shutil.rmtree(readback, ignore_errors=True)


def calibrate(
    lab: Lab, scenario: Scenario, layer: str, drive: Driver = cli
) -> tuple[dict[str, int], float]:
    """The operation counts and duration of a clean run (what faults and kills are drawn from)."""
    outcome = trial(lab, scenario, layer, None, 0, drive=drive)
    if outcome.verdict != "survived":
        raise AssertionError(f"a clean run failed: {outcome.summary()}\n{outcome.excerpt()}")
    return outcome.ops, outcome.first.seconds


def kill_moment(rng: random.Random, duration: float) -> float:
    return rng.uniform(5.0, max(duration, 6.0))


def table(readback: str, name: str) -> DeltaTable:
    return DeltaTable(f"{readback}/tables/{name}")
