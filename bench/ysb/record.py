"""YSB's rows of the performance page (``bench/results/ysb_*.json``), written through
:class:`bench.results.Run` as every benchmark's are.

A row's figures come from one run: lakefeed over the plain PySpark job (cold, warm), over the
physical limit (the ``arrow`` leg), over PyFlink, and the Arrow reader's leg. Each file is
replaced by a run with the arguments of its stored command, or written to ``--results DIR`` by
any run that has the legs it needs; a run whose legs failed writes no row of them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.results import Run, count

Figures = dict[str, Any]
Rates = Mapping[str, float]


@dataclass(frozen=True)
class Row:
    """One page row: which legs its figures need, and whether it is a warm-up run's (True), a
    cold run's (False) or either's (None)."""

    benchmark: str
    baseline: str
    order: int
    legs: tuple[str, ...]
    warm: bool | None
    figures: Callable[[Rates], Figures]


def _ratio(rates: Rates, mine: str, theirs: str) -> float:
    return rates[mine] / rates[theirs]


def _against(mine: str, theirs: str, target: float) -> Callable[[Rates], Figures]:
    return lambda rates: {"ratio": round(_ratio(rates, mine, theirs), 2), "target": target}


def _limit(rates: Rates) -> Figures:
    spark = _ratio(rates, "pyspark", "arrow")
    ratio = _ratio(rates, "lakefeed", "arrow")
    return {
        "ratio": round(ratio, 2),
        "target": 0.5,
        "shown": f"{ratio:.2f}x (PySpark {spark:.2f}x)",
    }


def _arrow_reader(rates: Rates) -> Figures:
    ratio = _ratio(rates, "lakefeed-arrow", "pyspark")
    default = _ratio(rates, "lakefeed", "pyspark")
    limit = _ratio(rates, "lakefeed-arrow", "arrow")
    shown = f"{ratio:.2f}x (default reader {default:.2f}x; {limit:.2f}x of the pyarrow limit)"
    return {"ratio": round(ratio, 2), "target": 1.5, "shown": shown}


SPARK, LIMIT, FLINK = (
    ("lakefeed", "pyspark"),
    ("lakefeed", "pyspark", "arrow"),
    ("lakefeed", "flink"),
)
JOB = "plain PySpark job"
ROWS = {
    "ysb_cold": Row("YSB, cold", JOB, 80, SPARK, False, _against("lakefeed", "pyspark", 0.95)),
    "ysb_warm": Row("YSB, warm", JOB, 90, SPARK, True, _against("lakefeed", "pyspark", 0.9)),
    "ysb_arrow": Row(
        "YSB, lakefeed.reader=arrow (pruning + pushdown)",
        JOB,
        95,
        ("lakefeed", "lakefeed-arrow", "pyspark", "arrow"),
        None,
        _arrow_reader,
    ),
    "ysb_limit": Row(
        "YSB vs physical limit, cold", "Arrow/numpy, no Spark", 100, LIMIT, False, _limit
    ),
    "ysb_limit_warm": Row(
        "YSB vs physical limit, warm", "Arrow/numpy, no Spark", 101, LIMIT, True, _limit
    ),
    "ysb_flink": Row(
        "YSB vs PyFlink, warm", "PyFlink", 110, FLINK, True, _against("lakefeed", "flink", 1.0)
    ),
    "ysb_flink_cold": Row(
        "YSB vs PyFlink, cold", "PyFlink", 111, FLINK, False, _against("lakefeed", "flink", 1.0)
    ),
}


@dataclass(frozen=True)
class Recorder:
    """Each row's :class:`Run`, taken when the benchmark starts (whether this run may write that
    row's file: bench/results.py decides per file, from its stored command), and the default
    batch size a workload names only when it differs."""

    runs: Mapping[str, Run]
    default_batch: int

    @classmethod
    def begin(cls, parser: argparse.ArgumentParser, argv: Sequence[str]) -> Recorder:
        runs = {name: Run.begin(parser, [name], argv) for name in ROWS}
        return cls(runs, parser.get_default("max_files"))

    def write(self, summary: Mapping[str, Any], args: argparse.Namespace) -> None:
        """Write (or say why not) every row this run has the legs for."""
        rates = _rates(summary)
        for name, row in ROWS.items():
            if row.warm not in (None, args.warmup) or not set(row.legs) <= rates.keys():
                continue
            self.runs[name].record(
                name,
                benchmark=row.benchmark,
                workload=self._workload(args),
                baseline=row.baseline,
                order=row.order,
                **row.figures(rates),
            )

    def _workload(self, args: argparse.Namespace) -> str:
        """``2M events, 40 files, cold`` (with the files per batch when not the default)."""
        parts = [f"{count(args.events)} events", f"{args.files} files"]
        if args.max_files != self.default_batch:
            parts.append(f"{args.max_files} files per batch")
        parts.append("after a warm-up" if args.warmup else "cold")
        return ", ".join(parts)


def _rates(summary: Mapping[str, Any]) -> dict[str, float]:
    """The median events/s of each leg whose runs all checked out against the reference."""
    return {
        leg: figures["median_events_per_s"]
        for leg, figures in summary["legs"].items()
        if figures["correct"]
        and not figures["failures"]
        and math.isfinite(figures["median_events_per_s"])
        and figures["median_events_per_s"] > 0
    }
