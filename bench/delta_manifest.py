"""What keeping Delta's symlink manifests fresh costs a commit, and what caching a location's
S3 settings saves, Spark-free (A/B in one run, several repeats).

Manifests: ``--commits`` one-file appends (delta-rs, ``--partitions`` partitions, each commit
touching one) to a table with ``delta.compatibility.symlinkFormatManifest.enabled`` on, timing
the commit and lakefeed's post-commit refresh (:func:`manifest.after_commit`) separately; the
same refresh with the property off is the baseline (it must cost nothing). Storage:
``storage.settings_for`` resolved afresh vs cached, for a file under a table location with
``--prefixes`` registered locations.

    PYTHONPATH=$PWD .venv/bin/python -m bench.delta_manifest --commits 50 --partitions 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import timeit
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from lakefeed.core import storage
from lakefeed.delta import manifest


def _manifests(
    root: Path, commits: int, partitions: int, on: bool, kept: bool
) -> tuple[float, float]:
    """Median ms per commit and per post-commit refresh (``kept``: on the writer's handle
    brought up to date, as a stream's commit does; else the table opened afresh)."""
    config = {manifest.ENABLED: "true" if on else "false"}
    rows = pa.table({"v": [0], "p": ["p0"]})
    DeltaTable.create(
        str(root), rows.schema, partition_by=["p"], configuration=config,
        raise_if_key_not_exists=False,
    )  # fmt: skip
    handle = DeltaTable(str(root))

    def latest() -> DeltaTable:
        handle.update_incremental()
        return handle

    commit_ms, refresh_ms = [], []
    for i in range(commits):
        batch = pa.table({"v": [i], "p": [f"p{i % partitions}"]})
        start = time.perf_counter()
        write_deltalake(str(root), batch, mode="append")
        middle = time.perf_counter()
        manifest.after_commit(str(root), config, i, latest if kept else None)
        end = time.perf_counter()
        commit_ms.append((middle - start) * 1000)
        refresh_ms.append((end - middle) * 1000)
    return statistics.median(commit_ms), statistics.median(refresh_ms)


def _settings(prefixes: int) -> tuple[float, float]:
    """µs per settings_for: resolved afresh, cached."""
    storage.register(None, {"fs.s3a.endpoint": "http://127.0.0.1:9000"})
    for i in range(prefixes):
        storage.register(f"s3://bucket/t{i}", {"fs.s3a.endpoint.region": "eu-west-1"})
    location = "s3://bucket/t0/part-00000.c000.snappy.parquet"
    registry = (id(storage._REGISTERED), len(storage._REGISTERED))
    env = tuple(os.environ.get(name) for name in storage.AWS_VARIABLES)
    fresh = storage._resolved.__wrapped__  # type: ignore[attr-defined]
    n = 20000
    uncached = timeit.timeit(lambda: fresh(storage._key(location), registry, 0, env), number=n)
    cached = timeit.timeit(lambda: storage.settings_for(location), number=n)
    return uncached / n * 1e6, cached / n * 1e6


LEGS = [("off", False, False), ("fresh", True, False), ("kept", True, True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--prefixes", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for repeat in range(args.repeats):
        with tempfile.TemporaryDirectory() as work:
            legs = [(Path(work) / name, on, kept) for name, on, kept in LEGS]
            off, fresh, kept = (_manifests(p, args.commits, args.partitions, *f) for p, *f in legs)
        print(
            f"[{repeat}] manifests: commit {kept[0]:.1f} ms; refresh on the writer's handle "
            f"{kept[1]:.1f} ms ({kept[1] / kept[0]:.2f}x a commit), opened afresh "
            f"{fresh[1]:.1f} ms ({fresh[1] / fresh[0]:.2f}x); off {off[1] * 1000:.1f} µs"
        )
        fresh, cached = _settings(args.prefixes)
        print(
            f"[{repeat}] settings_for: resolved {fresh:.1f} µs, cached {cached:.1f} µs "
            f"({fresh / cached:.1f}x)"
        )


if __name__ == "__main__":
    main()
