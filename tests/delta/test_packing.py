"""The one file-to-task packer both file-reading connectors use (Spark's rule)."""

from __future__ import annotations

import random

from lakefeed.connectors import packing
from lakefeed.connectors.delta.datasource import split_files
from lakefeed.connectors.files.filelog import FileEntry
from lakefeed.connectors.files.source import plan_partitions
from lakefeed.delta.log import DataFile

MB = 1024 * 1024


def _check_packing(sizes: list[int], slots: int) -> list[list[int]]:
    tasks = packing.pack(sizes, lambda s: s, slots)
    limit = packing.split_bytes(sizes, slots)
    # Every file in exactly one task, no task empty.
    assert sorted(s for task in tasks for s in task) == sorted(sizes)
    assert all(tasks)
    # A task stays within the split size unless it is one bigger file.
    assert all(sum(task) <= limit or len(task) == 1 for task in tasks)
    # No two neighbouring tasks could have been one (next fit closes a task only when full).
    for task, following in zip(tasks, tasks[1:], strict=False):
        used = sum(task) + len(task) * packing.OPEN_COST_BYTES
        assert used + following[0] > limit
    return tasks


def test_packing_property_over_random_file_sets() -> None:
    chance = random.Random(15)
    for _ in range(300):
        count = chance.randint(0, 60)
        big = chance.random() < 0.3
        sizes = [chance.randint(0, (400 if big else 6) * MB) for _ in range(count)]
        _check_packing(sizes, slots=chance.randint(1, 8))


def test_small_files_share_tasks_and_the_cores_are_used() -> None:
    assert len(_check_packing([MB] * 100, slots=4)) == 4  # not 100 tasks of one file
    assert len(_check_packing([1000 * MB], slots=4)) == 1
    assert len(_check_packing([200 * MB] * 3, slots=2)) == 3  # one per file above 128 MB
    assert packing.pack([], len, 2) == []


def test_both_connectors_split_alike() -> None:
    sizes = [5 * MB, 300 * MB, 1, 64 * MB, 64 * MB, 2 * MB]
    files = [FileEntry(f"/in/{i}", s, i) for i, s in enumerate(sizes)]
    delta = [DataFile(f"{i}.parquet", s, {}) for i, s in enumerate(sizes)]
    slots = packing.default_slots()
    by_files = [[e.size for e in p.entries] for p in plan_partitions(files, slots)]
    by_delta = [[f.size for f in p.files] for p in split_files(delta)]
    assert by_files == by_delta == packing.pack(sizes, lambda s: s, slots)
