"""How a benchmark leg (a subprocess, maybe in another venv) hands its figures back.

Stdlib only: the PyFlink leg imports it from its own virtual environment.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PREFIX = "BENCH-RESULT "


def job_arguments(description: str) -> argparse.ArgumentParser:
    """The arguments every job leg takes (the runner passes the same to each); a leg adds its
    own before parsing."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--campaigns", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--warmup", action="store_true", help="run the job once before measuring")
    return p


def emit(**figures: Any) -> None:
    """Print the leg's figures as one line the runner can find in the output."""
    print(PREFIX + json.dumps(figures), flush=True)


def sum_durations(progresses: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Spark's per-phase batch times (``durationMs``) summed over a run: a coarse profile
    that says whether the time went to planning, offsets, or the batch itself (source + sink).
    """
    total: dict[str, int] = {}
    for progress in progresses:
        for phase, ms in (progress.get("durationMs") or {}).items():
            total[phase] = total.get(phase, 0) + int(ms)
    return total


def stream_seconds(progresses: Iterable[Mapping[str, Any]]) -> float | None:
    """From the first micro-batch's start to the last one's end: the time spent streaming,
    without the query start-up and stop (and, for lakefeed, without pipeline validation).
    """
    spans = []
    for progress in progresses:
        start = _epoch(str(progress["timestamp"]))
        spans.append((start, start + int(progress["durationMs"]["triggerExecution"]) / 1000))
    if not spans:
        return None
    return max(end for _, end in spans) - min(start for start, _ in spans)


def first_batch_after(progresses: Iterable[Mapping[str, Any]], started: float) -> float | None:
    """Seconds from ``started`` (epoch) to the first micro-batch's start: what a job does
    before its first batch (query start; for lakefeed also loading checks and validation)."""
    starts = [_epoch(str(progress["timestamp"])) for progress in progresses]
    return min(starts) - started if starts else None


def _epoch(timestamp: str) -> float:
    """Spark's progress timestamps look like ``2026-11-22T01:35:06.112Z``."""
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def parse(output: str) -> dict[str, Any]:
    """The figures a leg printed; a leg that printed none failed."""
    for line in reversed(output.splitlines()):
        if line.startswith(PREFIX):
            return dict(json.loads(line[len(PREFIX) :]))
    raise RuntimeError("the benchmark leg printed no result line:\n" + output[-3000:])
