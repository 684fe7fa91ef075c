"""What every comparison script needs: run a leg as a subprocess, summarise repeats, chart.

Each leg runs in its own process (its own JVM or Flink gateway) so legs cannot warm each
other up, and a failing leg is reported instead of ending the run. Shared by ``bench/ysb``,
``bench/latency`` and ``bench/nexmark``.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.ysb import protocol

ROOT = Path(__file__).resolve().parents[2]
FLINK_VENV = ROOT / "bench" / ".venv-flink"
FLINK_PIN = "apache-flink==2.3.0"


@dataclass
class LegRun:
    """One run of one leg: its figures, or why it failed."""

    leg: str
    figures: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    wall_s: float = 0.0


def leg_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of a leg: the repository importable, Spark workers on this interpreter."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYSPARK_PYTHON": sys.executable,
        **dict(extra or {}),
    }


def fresh_dir(path: Path) -> Path:
    """``path``, emptied: a leg must never resume from an earlier run's checkpoint or tables
    (a re-run into the same --out would otherwise find its input already processed)."""
    shutil.rmtree(path, ignore_errors=True)
    return path


def run_leg(
    leg: str,
    argv: Sequence[str],
    log: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> LegRun:
    """Run ``argv`` from the repository root with ``env`` added; its output goes to ``log``.

    The leg runs in its own process group; a timeout or an interrupted runner kills the whole
    group (the leg's JVM and Python workers too), so no Spark is left behind.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        cwd=ROOT,
        env=leg_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        stdout, stderr = proc.communicate()
        log.write_text(stdout + "\n--- stderr ---\n" + stderr)
        return LegRun(leg, error=f"timed out after {timeout:.0f} s (log: {log})")
    except BaseException:
        kill_group(proc)
        raise
    wall = time.perf_counter() - started
    log.write_text(stdout + "\n--- stderr ---\n" + stderr)
    if proc.returncode != 0:
        return LegRun(leg, error=f"exit code {proc.returncode} (log: {log})", wall_s=wall)
    try:
        return LegRun(leg, protocol.parse(stdout), wall_s=wall)
    except RuntimeError:
        return LegRun(leg, error=f"no result line (log: {log})", wall_s=wall)


def kill_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """SIGKILL a process started with ``start_new_session=True`` and everything it started."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so ``with`` blocks stop brokers and legs on the way out."""
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))


def ensure_flink_venv() -> Path | None:
    """The PyFlink interpreter, creating ``bench/.venv-flink`` on first use.

    PyFlink pins py4j, pandas and pyarrow versions that conflict with pyspark, hence its own
    environment. Returns None (with the reason printed) when it cannot be created.
    """
    python = FLINK_VENV / "bin" / "python"
    if python.exists():
        return python
    print(f"creating {FLINK_VENV} with {FLINK_PIN} (one-time, a few minutes)", flush=True)
    try:
        subprocess.run(["python3", "-m", "venv", str(FLINK_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", FLINK_PIN], check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"cannot create the PyFlink venv: {error}", flush=True)
        return None
    return python


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> str:
    """Cores and memory, for the record next to every figure."""
    memory = ""
    with open("/proc/meminfo") as info:
        for line in info:
            if line.startswith("MemTotal:"):
                memory = f", {int(line.split()[1]) / 2**20:.0f} GiB"
    return f"{os.cpu_count()} cores{memory}, {platform.system()} {platform.machine()}"


def load_average() -> float:
    """1-minute load: a busy machine explains noisy figures."""
    return os.getloadavg()[0]


def bar_chart(
    path: Path, title: str, labels: Sequence[str], values: Sequence[float], unit: str
) -> None:
    """A labelled bar chart (PNG); matplotlib comes with the ``dev`` extra."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=110)
    bars = ax.bar(labels, values, color=["#2a7ab9", "#9aa5b1", "#e07b39", "#4caf50"][: len(values)])
    ax.bar_label(bars, labels=[f"{v:,.0f}" for v in values], padding=2, fontsize=8)
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
