"""The benchmarks' headline results: one JSON file per benchmark under ``bench/results/``.

docs/performance.md leads with a table generated from these files when the site is built
(``<!-- performance-results -->``, docs/hooks/reference.py), so the page shows what the files
say and nothing else. A benchmark run that should change the page writes its file with
:func:`record` (or the file is edited by hand from the run's output, with the run's date,
commit and machine); the lab notebook (docs/benchmarks.md) keeps the story of each run.

The verdict is computed, not written: a ratio with a minimum target is ``met`` or ``missed`` by
arithmetic. Only results without one number against a target (a range, a latency, an
orientation) carry a ``verdict`` of their own.

    .venv/bin/python -m bench.results      # print the table
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

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


def table(results: list[Result]) -> str:
    """The headline table as Markdown."""
    return "\n".join([*HEADER, *(r.row() for r in results)]) + "\n"


def commands(results: list[Result]) -> str:
    """The commands that reproduce the table, once each, as a shell block."""
    unique = list(dict.fromkeys(r.command for r in results))
    return "\n".join(["```bash", *unique, "```"]) + "\n"


if __name__ == "__main__":
    print(table(load()) + "\n" + commands(load()))
