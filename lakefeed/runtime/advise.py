"""``lakefeed advise watermark FLOW``: a watermark delay from the lateness the input really has.

Why from the Delta log: a table's commits are the order its rows arrived in, and the order a
stream reads them. Each commit's added files (``dataChange``; compaction rewrites are skipped,
their originals read while they exist) are read in version order. A row's *lateness* is the
newest event time of the commits before its own minus its event time (the rows of one commit
arrive together, so they are not late to each other), as Spark compares a batch's rows with the
watermark of the batches before. A delay ``d`` keeps a row when its lateness is below ``d``: the
advice is the smallest whole number of seconds that keeps the chosen share of rows.

The state the delay implies: with ``--key`` and ``--window``, keys × windows open (a tumbling
window stays in state until the watermark passes its end, so ``ceil((delay + window) / window)``
windows per key are open); without, the rows inside the delay (what a dedup keeps).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from urllib.parse import unquote, urlparse

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakefeed.core.lakehouse import Lakehouse
from lakefeed.delta import log
from lakefeed.pipeline.api import Pipeline
from lakefeed.runtime.errors import AdviceError
from lakefeed.runtime.evaluate import Evaluator, watermarks

_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


@dataclass(frozen=True)
class WatermarkAdvice:
    flow: str
    inputs: tuple[str, ...]
    event_time: str
    current_delay: str | None
    rows: int
    completeness: float
    delay_seconds: int
    on_time_with_current: float | None
    lateness_quantiles: dict[str, float]
    max_lateness_seconds: float
    state_rows: int
    state_basis: str

    def to_json(self) -> dict:
        return asdict(self)


def lateness(commits: Iterable[np.ndarray]) -> np.ndarray:
    """Each row's lateness in seconds (0 when on time), commits given oldest first as arrays of
    event times in epoch seconds (NaN: no event time, left out)."""
    newest = -math.inf
    parts = []
    for times in commits:
        times = times[~np.isnan(times)]
        parts.append(np.maximum(newest - times, 0.0))
        if times.size:
            newest = max(newest, float(times.max()))
    return np.concatenate(parts) if parts else np.empty(0)


def recommend_delay(late: np.ndarray, completeness: float) -> int:
    """Smallest whole seconds ``d`` with at least ``completeness`` % of rows' lateness < ``d``."""
    if not late.size:
        return 0
    kept = math.ceil(completeness / 100.0 * late.size)  # rows that must be on time
    needed = float(np.sort(late)[max(kept, 1) - 1])
    return math.floor(needed) + 1 if needed > 0 else 0


def seconds(interval: str) -> float:
    """Seconds of a Spark interval string ('2 minutes', '5 seconds', '1 hour 30 minutes')."""
    found = re.findall(r"(\d+(?:\.\d+)?)\s*(second|minute|hour|day)s?", interval.lower())
    if not found:
        raise AdviceError(f"cannot read {interval!r} as an interval", fix="write e.g. '5 minutes'")
    return sum(float(n) * _SECONDS[unit] for n, unit in found)


def state_estimate(
    rows_per_second: float, delay: float, keys: int | None, window: float | None
) -> tuple[int, str]:
    """Rows held in state for ``delay``, and how that was counted."""
    if keys is not None and window:
        open_windows = math.ceil((delay + window) / window)
        return keys * open_windows, f"{keys} keys x {open_windows} windows open"
    return math.ceil(rows_per_second * delay), f"{rows_per_second:.3g} rows/s x {delay:g} s"


def advise_watermark(
    spark: SparkSession,
    pipeline: Pipeline,
    lakehouse: Lakehouse,
    flow: str,
    completeness: float = 99.9,
    event_time: str | None = None,
    key: str | None = None,
    window: str | None = None,
) -> WatermarkAdvice:
    """Advice for ``flow`` from its input tables (see the module docstring)."""
    if not 0 < completeness < 100:
        raise AdviceError(f"completeness {completeness} is not a percentage between 0 and 100")
    evaluator = Evaluator(spark, pipeline, lakehouse, mode="inline")
    frame = evaluator.evaluate(flow) if flow in pipeline.datasets else None
    if frame is None:
        known = ", ".join(pipeline.datasets)
        raise AdviceError(f"no flow {flow!r} could be evaluated ({known})", fix="name a table")
    marks = watermarks(frame)
    inputs = tuple(n for n in evaluator.reads.get(flow, []) if pipeline.datasets[n].stored)
    if not inputs:
        raise AdviceError(
            f"{flow!r} reads no table of the pipeline: its arrival order is not recorded",
            fix="advise the flow that reads the table your source feeds",
        )
    column = event_time or (marks[0][0] if marks else None)
    if column is None:
        raise AdviceError(f"{flow!r} has no watermark", fix="pass --event-time EXPR")
    times, distinct_keys = _read(spark, lakehouse, inputs, column, key)
    late = np.concatenate([lateness(commits) for commits in times])
    everything = np.concatenate([t for commits in times for t in commits] or [np.empty(0)])
    span = float(np.nanmax(everything) - np.nanmin(everything)) if everything.size else 0.0
    delay = recommend_delay(late, completeness)
    current = marks[0][1] if marks else None
    rate = late.size / span if span > 0 else float(late.size)
    state, basis = state_estimate(rate, delay, distinct_keys, seconds(window) if window else None)
    return WatermarkAdvice(
        flow=flow,
        inputs=inputs,
        event_time=column,
        current_delay=current,
        rows=int(late.size),
        completeness=completeness,
        delay_seconds=delay,
        on_time_with_current=(
            float(np.mean(late < seconds(current))) if current and late.size else None
        ),
        lateness_quantiles={
            f"p{q:g}": float(np.quantile(late, q / 100.0)) if late.size else 0.0
            for q in (50, 99, 99.9)
        },
        max_lateness_seconds=float(late.max()) if late.size else 0.0,
        state_rows=state,
        state_basis=basis,
    )


def _read(
    spark: SparkSession, lakehouse: Lakehouse, tables: Sequence[str], column: str, key: str | None
) -> tuple[list[list[np.ndarray]], int | None]:
    """Per table, event times (epoch seconds) per commit oldest first; distinct keys if asked."""
    result: list[list[np.ndarray]] = []
    keys: set = set()
    for name in tables:
        root = str(lakehouse.table_path(name))
        versions = _added_files(root)
        files = [f for f in versions if os.path.exists(f)]
        if not files:
            result.append([])
            continue
        frame = _times(spark, root, files, column, key)
        rows = frame.toArrow()
        paths = [_local(p) for p in rows.column("file").to_pylist()]
        stamp = rows.column("t").to_numpy(zero_copy_only=False).astype("float64")
        version = np.array([versions.get(p, -1) for p in paths])
        result.append([stamp[version == v] for v in sorted(set(versions.values()))])
        if key is not None:
            keys.update(rows.column("k").to_pylist())
    return result, (len(keys) if key is not None else None)


def _times(
    spark: SparkSession, root: str, files: list[str], column: str, key: str | None
) -> DataFrame:
    frame = spark.read.option("basePath", root).parquet(*files)
    selected = [
        F.col("_metadata.file_path").alias("file"),
        (F.unix_micros(F.expr(column).cast("timestamp")) / 1e6).alias("t"),
    ]
    if key is not None:
        selected.append(F.expr(key).alias("k"))
    return frame.select(*selected)


def _added_files(root: str) -> dict[str, int]:
    """Every data file a commit added as new data, with the commit's version."""
    latest = log.latest_version(root)
    added: dict[str, int] = {}
    for version in range(0, (latest if latest is not None else -1) + 1):
        commit = log.read_commit(root, version)
        for data in commit.adds if commit is not None else []:
            added[os.path.join(root, unquote(data.path))] = version
    return added


def _local(uri: str) -> str:
    """A local path from Spark's ``file:/...`` or ``file:///...`` URI."""
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri
