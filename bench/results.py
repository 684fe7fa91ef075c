"""The benchmarks' headline results: one JSON file per benchmark under ``bench/results/``.

docs/performance.md leads with a table generated from these files when the site is built
(``<!-- performance-results -->``, docs/hooks/reference.py), so the page shows what the files
say and nothing else. Each benchmark script writes its files itself, through a :class:`Run`
(date, commit, machine and command filled in), so a rerun updates the page; the lab notebook
(docs/benchmarks.md) keeps the story of each run.

Which runs write: a run with the arguments of a file's ``command`` (the page's workload)
replaces that file; a run at any other size (a smoke run, a test) writes nothing unless
``--results DIR`` names a folder, so small numbers never replace the page's.

The verdict is computed, not written: a ratio with a minimum target is ``met`` or ``missed`` by
arithmetic. Only results without one number against a target (a range, a latency, an
orientation) carry a ``verdict`` of their own.

    .venv/bin/python -m bench.results      # print the table
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
DATE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}")
HEADER = (
    "| Benchmark | Workload | Baseline | Ratio | Target | Verdict | Date (UTC) | Commit "
    "| Machine |",
    "| --- | --- | --- | ---: | ---: | --- | --- | --- | --- |",
)


@dataclass(frozen=True)
class Result:
    """One benchmark's newest headline figure against its baseline.

    ``ratio``: lakefeed's rate over the baseline's, measured in the same run; ``target``: the
    ratio it must reach (None: none). ``shown`` replaces the ratio's cell where one number does
    not tell it (``"0.62–0.71x"``, ``"p99 1.23 s"``); ``target_text`` and ``verdict`` likewise for
    a target that is not a minimum ratio. ``order`` places the row on the page.
    """

    benchmark: str
    workload: str
    baseline: str
    date: str
    machine: str
    command: str
    order: int
    ratio: float | None = None
    target: float | None = None
    shown: str | None = None
    target_text: str | None = None
    verdict: str | None = None
    commit: str | None = None

    def __post_init__(self) -> None:
        if not DATE.fullmatch(self.date):
            raise ValueError(f"{self.benchmark}: date {self.date!r} is not YYYY-MM-DD HH:MM (UTC)")
        if self.ratio is None and self.shown is None:
            raise ValueError(f"{self.benchmark}: give a ratio or the text shown instead")
        if self.verdict is not None and self.ratio is not None and self.target is not None:
            raise ValueError(f"{self.benchmark}: the verdict of a ratio and a target is computed")

    @property
    def outcome(self) -> str:
        """``met`` / ``missed`` from the ratio and the target; else the stated verdict."""
        if self.ratio is not None and self.target is not None:
            return "met" if self.ratio >= self.target else "missed"
        return self.verdict or "—"

    def row(self) -> str:
        ratio = self.shown or f"{self.ratio:.2f}x"
        if self.target is not None:
            ratio = f"**{ratio}**" if self.shown is None else ratio
        target = f"≥ {self.target:g}x" if self.target is not None else self.target_text or "—"
        cells = (
            self.benchmark,
            self.workload,
            self.baseline,
            ratio,
            target,
            self.outcome,
            self.date,
            self.commit or "—",
            self.machine,
        )
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def load(folder: Path = RESULTS) -> list[Result]:
    """Every result file in ``folder``, in page order."""
    found = [Result(**json.loads(p.read_text())) for p in sorted(folder.glob("*.json"))]
    return sorted(found, key=lambda r: (r.order, r.benchmark))


def record(result: Result, name: str, folder: Path = RESULTS) -> Path:
    """Write ``result`` as ``folder/name.json`` (what a benchmark calls after its run)."""
    path = folder / f"{name}.json"
    values = {k: v for k, v in asdict(result).items() if v is not None}
    path.write_text(json.dumps(values, indent=2, ensure_ascii=False) + "\n")
    return path


def add_option(parser: argparse.ArgumentParser) -> None:
    """``--results DIR``: where a benchmark writes its result files (see the module's docstring)."""
    parser.add_argument(
        "--results",
        type=Path,
        metavar="DIR",
        help="write the result files here (default: bench/results/, when the run's arguments "
        "are those of the page's command; otherwise none)",
    )


@dataclass(frozen=True)
class Run:
    """One benchmark run's provenance, taken when it starts, and where its results go.

    ``folder`` None: the run writes nothing (``why`` says so when it would have)."""

    folder: Path | None
    why: str
    command: str
    date: str
    machine: str
    commit: str | None

    @classmethod
    def begin(
        cls, parser: argparse.ArgumentParser, names: Sequence[str], argv: Sequence[str]
    ) -> Run:
        """The run of ``argv`` (the script's arguments) that may write ``names``' files."""
        chosen = parser.parse_args(argv).results
        headline = _headline_command(parser, names, argv)
        folder = chosen if chosen is not None else (RESULTS if headline else None)
        files = ", ".join(f"bench/results/{name}.json" for name in names)
        why = "" if folder else f"no file of {files} records these arguments (--results DIR)"
        return cls(
            folder=folder,
            why=why,
            command=headline or f"{_python()} {shlex.join(argv)}".rstrip(),
            date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
            machine=_machine(),
            commit=_commit(),
        )

    def record(self, name: str, **figures: Any) -> None:
        """Write ``name``'s result (``figures``: :class:`Result`'s other fields), or say why not."""
        if self.folder is None:
            print(f"result {name}: not written: {self.why}")
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        provenance = {"date": self.date, "machine": self.machine, "command": self.command}
        path = record(Result(**provenance, commit=self.commit, **figures), name, self.folder)
        print(f"result {name}: written to {path}")


def _headline_command(
    parser: argparse.ArgumentParser, names: Sequence[str], argv: Sequence[str]
) -> str | None:
    """The stored command of ``names``' files whose arguments parse as ``argv``'s, if one does
    (parsed, so the order of options and spelled-out defaults do not matter)."""
    mine = {**vars(parser.parse_args(argv)), "results": None}
    for name in names:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            continue
        command = json.loads(path.read_text())["command"]
        theirs, unknown = parser.parse_known_args(_script_arguments(command))
        if not unknown and {**vars(theirs), "results": None} == mine:
            return str(command)
    return None


def _script_arguments(command: str) -> list[str]:
    """The arguments after the script in a stored command (``-m bench.x ARGS``, ``x.py ARGS``)."""
    words = shlex.split(command)
    for at, word in enumerate(words):
        if word == "-m":
            return words[at + 2 :]
        if word.endswith(".py"):
            return words[at + 1 :]
    raise ValueError(f"no script in the command {command!r}")


def _python() -> str:
    """How this script was started: ``.venv/bin/python -m bench.x`` (the README's form)."""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    script = f"-m {spec.name}" if spec is not None else sys.argv[0]
    return f".venv/bin/python {script}"


def _machine() -> str:
    """Cores, memory and the load when the run began: a loaded machine's figures say less."""
    with open("/proc/meminfo") as meminfo:
        kib = int(next(line for line in meminfo if line.startswith("MemTotal")).split()[1])
    return f"{os.cpu_count()} cores, {kib / 2**20:.0f} GiB, load {os.getloadavg()[0]:.1f}"


def _commit() -> str | None:
    """The short commit, with ``+`` when tracked files differ from it (None outside git)."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    try:
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results")
        return git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def count(n: int) -> str:
    """``4000000`` → ``4M``, ``320000`` → ``320k``: sizes as the page writes them."""
    for unit, size in (("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return str(n)


def table(results: list[Result]) -> str:
    """The headline table as Markdown."""
    return "\n".join([*HEADER, *(r.row() for r in results)]) + "\n"


def commands(results: list[Result]) -> str:
    """The commands that reproduce the table, once each, as a shell block."""
    unique = list(dict.fromkeys(r.command for r in results))
    return "\n".join(["```bash", *unique, "```"]) + "\n"


if __name__ == "__main__":
    print(table(load()) + "\n" + commands(load()))
