"""Files into read tasks, the way Spark's own file sources pack them (one rule for every connector).

A task per file wastes a task's start on each small file; one task for everything leaves cores
idle. Spark's ``FilePartition.getFilePartitions`` settles it with two numbers, and lakefeed's
Python readers (``cloudFiles``, ``delta``) use the same rule, so a stream read by Spark's Parquet
reader and the same stream read in Python are split alike:

- every file costs its size plus ``OPEN_COST_BYTES`` (``spark.sql.files.openCostInBytes``: opening
  a file is worth that many bytes of reading);
- a task holds up to ``min(MAX_PARTITION_BYTES, max(OPEN_COST_BYTES, total cost / slots))`` bytes
  (``spark.sql.files.maxPartitionBytes`` or a fair share of the cores, whichever is smaller);
- files go in largest first, each into the current task unless it would overflow it (next fit).

So a task's files sum to at most that size unless it holds a single bigger file, and small
files share tasks instead of each starting its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TypeVar

OPEN_COST_BYTES = 4 * 1024 * 1024
MAX_PARTITION_BYTES = 128 * 1024 * 1024

T = TypeVar("T")


def default_slots() -> int:
    """The cores tasks can run on at once (a local session uses them all)."""
    return os.cpu_count() or 2


def split_bytes(sizes: Sequence[int], slots: int) -> int:
    """The bytes a task may hold for files of ``sizes`` spread over ``slots`` cores."""
    total = sum(size + OPEN_COST_BYTES for size in sizes)
    return min(MAX_PARTITION_BYTES, max(OPEN_COST_BYTES, total // max(slots, 1)))


def pack(items: Sequence[T], size: Callable[[T], int], slots: int) -> list[list[T]]:
    """``items`` (files) grouped into tasks by Spark's rule; every item lands in one task."""
    if not items:
        return []
    limit = split_bytes([size(item) for item in items], slots)
    tasks: list[list[T]] = [[]]
    used = 0
    for item in sorted(items, key=size, reverse=True):
        if tasks[-1] and used + size(item) > limit:
            tasks.append([])
            used = 0
        tasks[-1].append(item)
        used += size(item) + OPEN_COST_BYTES
    return tasks
