"""Crash harness: run a driver script, SIGKILL it (with its JVM) at random moments, restart.

Used by every exactly-once test so that "kill -9 mid-stream" means the same thing everywhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lakefeed.core.storage import AnyPath
from tests.support.delta import commit_count

# Crash drivers are short-lived JVMs started again and again: C1-only JIT and the serial GC start
# Spark's driver about twice as fast on 2 busy cores (hot loops run ~30% slower, which these small
# runs hardly feel). An exported SPARK_SUBMIT_OPTS wins (set it empty for the JVM's defaults).
DRIVER_JVM = {"SPARK_SUBMIT_OPTS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
REPO = Path(__file__).resolve().parents[2]


@dataclass
class CrashReport:
    kills: int = 0
    runs: int = 0
    finished_early: int = 0  # runs that exited 0 before their kill moment came
    logs: list[str] = field(default_factory=list)


def _spawn(argv: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    # A new session so the whole process group (Python driver + its JVM) dies together.
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_with_kills(
    argv: Sequence[str],
    *,
    workdir: Path,
    kills: int,
    kill_when: Callable[[int], bool] | None = None,
    min_delay: float = 4.0,
    max_delay: float = 12.0,
    seed: int = 7,
    env: dict[str, str] | None = None,
    final_timeout: float = 240.0,
) -> CrashReport:
    """Run ``argv`` until it exits 0, killing it ``kills`` times first.

    Each kill happens after a random delay in [min_delay, max_delay], or, when ``kill_when`` is
    given, as soon as ``kill_when(kill_index)`` returns True (polled every 50 ms, with the random
    delay as an upper bound). The final run must finish by itself within ``final_timeout``.
    """
    rng = random.Random(seed)
    full_env = {**DRIVER_JVM, **os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})}
    report = CrashReport()
    log = workdir / "driver.log"
    for index in range(kills):
        proc = _spawn(argv, {**full_env, "LAKEFEED_CRASH_RUN": str(index)}, log)
        report.runs += 1
        deadline = time.monotonic() + rng.uniform(min_delay, max_delay)
        while time.monotonic() < deadline and proc.poll() is None:
            if kill_when is not None and kill_when(index):
                break
            time.sleep(0.05)
        if proc.poll() is None:
            _kill(proc)
            report.kills += 1
        elif proc.returncode == 0:
            report.finished_early += 1
    proc = _spawn(argv, {**full_env, "LAKEFEED_CRASH_RUN": "final"}, log)
    report.runs += 1
    try:
        code = proc.wait(timeout=final_timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise AssertionError(f"final run did not finish; log:\n{_tail(log)}") from None
    if code != 0:
        raise AssertionError(f"final run exited {code}; log:\n{_tail(log)}")
    report.logs.append(log.read_text())
    return report


def run_driver_with_kills(
    driver: Path,
    *args: str | Path,
    workdir: Path,
    kills: int,
    kill_when: Callable[[int], bool] | None = None,
    env: Mapping[str, str] | None = None,
    **timing: float,
) -> CrashReport:
    """The Python script ``driver`` run with ``args`` by this interpreter and killed as
    :func:`run_with_kills` says (``timing``: its ``min_delay``, ``max_delay``, ``seed`` and
    ``final_timeout``). The repository is on the driver's ``PYTHONPATH``: drivers beside their
    tests import ``tests.support``; ``env`` adds to it (an object store's endpoint and keys)."""
    return run_with_kills(
        [sys.executable, str(driver), *map(str, args)],
        workdir=workdir,
        kills=kills,
        kill_when=kill_when,
        env={"PYTHONPATH": str(REPO), **(env or {})},
        **timing,
    )


def run_delta_driver_with_kills(
    driver: Path, work: Path, *args: str, kills: int, seed: int
) -> CrashReport:
    """``driver`` (given ``work`` and ``args``) streaming into the Delta table ``work/dst``,
    ``kills`` runs before its last: run 1 kills itself right after a Delta commit, before
    Spark's commit log has the batch (the driver's hook, ``LAKEFEED_CRASH_RUN=1``), the others
    are killed at a random moment up to a second after a commit of the table (see
    :func:`run_with_kills`)."""
    kill_when = kill_soon_after_progress(
        lambda: commit_count(work / "dst"), seed=seed, within=1.0, spare={1}
    )
    return run_driver_with_kills(
        driver,
        work,
        *args,
        workdir=work,
        kills=kills,
        kill_when=kill_when,
        # Upper bounds only: kill_when kills soon after progress; a loaded machine starts slowly.
        min_delay=240,
        max_delay=240,
        final_timeout=900,
    )


def write_cli_driver(
    path: Path, args: Sequence[str], *, continuous: bool = True, restarts: int | None = 30
) -> Path:
    """A crash-test driver: ``lakefeed <args>`` in continuous mode (a failed flow restarted up to
    ``restarts`` times: a loaded machine makes Python workers miss Spark's connect-back),
    available-now on the final run of :func:`run_with_kills` (so it ends by itself); with
    ``continuous=False``, ``args`` as given on every run."""
    final = ""
    if continuous:
        args = [*args, "--mode", "continuous"]
        args += ["--max-restarts", str(restarts)] if restarts is not None else []
        final = (
            "if os.environ.get('LAKEFEED_CRASH_RUN') == 'final':\n"
            "    args[args.index('continuous')] = 'available-now'\n"
        )
    path.write_text(
        "import os\n"
        "from lakefeed.cli.main import cli\n"
        f"args = {list(args)!r}\n"
        f"{final}"
        "cli(args, standalone_mode=True)\n"
    )
    return path


def run_cli_with_kills(
    workdir: Path,
    args: Sequence[str],
    *,
    kill_when: Callable[[int], bool],
    kills: int = 1,
    min_delay: float = 120,
    max_delay: float = 180,
    final_timeout: float = 400,
    continuous: bool = True,
    restarts: int | None = 30,
) -> CrashReport:
    """``lakefeed <args>`` (:func:`write_cli_driver`, in ``workdir``) killed ``kills`` times
    as ``kill_when`` says, then run to its end (see :func:`run_with_kills`)."""
    driver = write_cli_driver(workdir / "driver.py", args, continuous=continuous, restarts=restarts)
    return run_driver_with_kills(
        driver,
        workdir=workdir,
        kills=kills,
        kill_when=kill_when,
        min_delay=min_delay,
        max_delay=max_delay,
        final_timeout=final_timeout,
    )


def _tail(log: Path) -> str:
    return log.read_text()[-4000:]


def spark_commits(checkpoint: Path) -> int:
    """Micro-batches a Spark checkpoint has committed (0 before its first): a kill moment."""
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def kill_soon_after_progress(
    progress: Callable[[], int], *, seed: int, within: float, spare: Container[int] = ()
) -> Callable[[int], bool]:
    """A ``kill_when``: kill each run at a random moment up to ``within`` s after it made
    progress (``progress()`` grew past its value when the run was first polled), so kills land
    mid-stream rather than during start-up. Runs in ``spare`` are left to die another way."""
    rng = random.Random(seed)
    armed: dict[int, tuple[int, float]] = {}

    def kill_when(index: int) -> bool:
        if index in spare:
            return False
        count = progress()
        baseline, at = armed.setdefault(index, (count, 0.0))
        if count <= baseline:
            return False
        if at == 0.0:
            armed[index] = (baseline, time.monotonic() + rng.uniform(0.0, within))
            return False
        return time.monotonic() >= at

    return kill_when


def driver_session(  # noqa: ANN201 - pyspark in the driver only
    app_name: str, checkpoint: AnyPath, storage: Sequence[str] = ()
):
    """The SparkSession of a crash-test driver script: small, local, no UI; ``storage`` as in
    :func:`lakefeed.spark_session` (an S3 location adds S3A).

    A kill while Spark wrote the first batch's offsets leaves a temporary file that makes
    Spark 4.3 refuse the checkpoint forever; lakefeed's runner clears it before a flow starts,
    and so does this, for the drivers' plain PySpark queries.
    """
    from lakefeed.session import spark_session
    from lakefeed.spark.checkpoint_files import clear_interrupted_start

    clear_interrupted_start(checkpoint)

    return spark_session(
        app_name,
        master="local[2]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        storage=storage,
    )


def run_to_end(spark, query) -> None:  # noqa: ANN001 - pyspark in the driver only
    """A driver's last step: wait for its query to end, exit non-zero (so the harness sees a
    failed run) if it failed, then stop Spark."""
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    spark.stop()


def record_progress(work: Path, app_id: str | None) -> None:
    """Before Spark starts, append to ``work/runs.jsonl`` how far the Delta table ``work/dst``
    (its txn of ``app_id``) and Spark's commit log in ``work/cp`` each got, so a test can prove
    that a restart found a Delta commit ahead of Spark's commit log."""
    from deltalake import DeltaTable

    from lakefeed.delta import log

    delta_txn = None
    if app_id and log.is_delta_table(str(work / "dst")):
        delta_txn = DeltaTable(str(work / "dst")).transaction_version(app_id)
    commits = work / "cp" / "commits"
    spark_done = (
        [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.exists() else []
    )
    run = {
        "run": os.environ.get("LAKEFEED_CRASH_RUN"),
        "delta_txn": delta_txn,
        "spark_commit": max(spark_done) if spark_done else None,
    }
    with (work / "runs.jsonl").open("a") as out:
        out.write(json.dumps(run) + "\n")


def read_runs(work: Path, artifact: Path) -> list[dict]:
    """The runs :func:`record_progress` recorded, also kept as ``artifact``."""
    runs = [json.loads(line) for line in (work / "runs.jsonl").read_text().splitlines()]
    artifact.write_text(json.dumps(runs, indent=1))
    return runs


def ahead_of_spark(runs: list[dict]) -> list[dict]:
    """The runs that found the Delta commit of a batch ahead of Spark's commit log."""
    return [
        r
        for r in runs
        if r["delta_txn"] is not None
        and (r["spark_commit"] is None or r["delta_txn"] > r["spark_commit"])
    ]
