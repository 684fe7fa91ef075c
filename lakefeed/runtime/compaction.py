"""Automatic compaction of streaming tables: Delta's auto compaction, off the stream's path.

Every micro-batch commits at least one small file, so a stream running for weeks leaves a table
of hundreds of thousands of files that every reader lists and opens. As Delta's auto compaction
does after a write, a partition whose small files reach a count is compacted; here a background
thread of a continuous run checks each table every ``interval`` seconds, so no micro-batch waits
for it, and a triggered run checks each table once its flow has ended.

Compaction is delta-rs's ``optimize.compact`` (lakefeed's own under column mapping and on
clustered, in-commit-timestamp or domain-metadata tables, which delta-rs refuses:
:func:`lakefeed.delta.rewrite.compact`, which also clusters a clustered table's files): the
small files are rewritten into bigger ones in one commit whose ``remove``/``add`` actions carry
``dataChange=false``. Readers
see the same rows; Delta streams reading the table skip such commits (nothing new to read); the
stream's own append (a blind append) and the compaction do not conflict, whichever commits
first, so both commit. The replaced files stay on disk for readers of older versions until a
vacuum.

Switches follow Delta and DLT (table properties, ``TBLPROPERTIES`` in SQL):

- ``delta.autoOptimize.autoCompact``: ``true``/``auto`` compacts, ``false`` never does;
- unset, ``pipelines.autoOptimize.managed`` decides (DLT's default: ``true``, so a pipeline's
  streaming tables are compacted unless a table says otherwise).

Thresholds are Delta's session settings: ``spark.databricks.delta.autoCompact.minNumFiles``
(default 50 small files in one partition), ``...autoCompact.maxFileSize`` (the target size,
default 128 MiB) and ``...autoCompact.minFileSize`` (smaller files count as small; default half
the target). A compaction that fails is logged and tried again at the next check: it never fails
a run.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from lakefeed.core.errors import ConfigError
from lakefeed.core.logs import get_logger
from lakefeed.core.options import parse_bytes
from lakefeed.delta import manifest, rewrite
from lakefeed.delta.log import is_delta_table as log_exists
from lakefeed.delta.log import rs_table

log = get_logger(__name__)

AUTO_COMPACT = "delta.autoOptimize.autoCompact"
MANAGED = "pipelines.autoOptimize.managed"
_CONF = "spark.databricks.delta.autoCompact."


@dataclass(frozen=True)
class Policy:
    """When a partition is worth compacting, and into what size."""

    min_files: int = 50
    max_file_size: int = 128 * 1024 * 1024
    min_file_size: int | None = None  # default: half of max_file_size

    @property
    def small(self) -> int:
        return self.min_file_size if self.min_file_size is not None else self.max_file_size // 2

    @classmethod
    def from_conf(cls, get: Callable[[str], str | None]) -> Policy:
        """Delta's ``spark.databricks.delta.autoCompact.*`` settings, where set."""

        def number(name: str) -> int | None:
            value = get(_CONF + name)
            if value in (None, ""):
                return None
            size = parse_bytes(str(value))
            if size is None:
                raise ConfigError(
                    f"{_CONF + name}={value!r} is not a positive number",
                    fix=f"e.g. --conf {_CONF}minNumFiles=50 or {_CONF}maxFileSize=128m",
                )
            return size

        return cls(
            min_files=number("minNumFiles") or cls.min_files,
            max_file_size=number("maxFileSize") or cls.max_file_size,
            min_file_size=number("minFileSize"),
        )


def enabled(properties: Mapping[str, str]) -> bool:
    """Whether a table with these properties is compacted automatically (see module doc)."""
    value = properties.get(AUTO_COMPACT)
    if value is not None:
        return value.strip().lower() in ("true", "auto")
    return properties.get(MANAGED, "true").strip().lower() != "false"


def crowded_partitions(actions: pa.Table, partition_cols: Sequence[str], policy: Policy) -> list:
    """Partitions (as delta-rs partition filters; ``[[]]`` for an unpartitioned table) holding
    at least ``policy.min_files`` small files, from ``get_add_actions(flatten=True)``."""
    if actions.num_rows == 0:
        return []
    small = actions.filter(pc.less(actions.column("size_bytes"), policy.small))
    keys = [f"partition.{c}" for c in partition_cols]
    columns = [small.column(k).to_pylist() for k in keys]
    counts = Counter(zip(*columns, strict=True)) if keys else Counter({(): small.num_rows})
    return [
        [(c, "=", _text(v)) for c, v in zip(partition_cols, key, strict=True)]
        for key, count in counts.items()
        if count >= policy.min_files
    ]


def _text(value: object) -> str:
    """A partition value as delta-rs filters take it (a NULL partition has none)."""
    return "" if value is None else str(value)


def compact_if_needed(path: str, policy: Policy) -> int:
    """Compact the crowded partitions of the table at ``path``; the files it removed."""
    if not log_exists(path):
        return 0
    table = rs_table(path)
    if not enabled(table.metadata().configuration):
        return 0
    actions = pa.table(table.get_add_actions(flatten=True))
    columns = list(table.metadata().partition_columns)
    removed = 0
    for filters in crowded_partitions(actions, columns, policy):
        before = table.version()
        metrics = _compact(path, table, filters, policy)
        removed += int(metrics.get("numFilesRemoved", 0))
        table = rs_table(path)
        _refresh_manifests(path, table, before)
    return removed


def _compact(path: str, table: DeltaTable, filters: list, policy: Policy) -> Mapping[str, Any]:
    """One partition's compaction: delta-rs's, or lakefeed's own where delta-rs's OPTIMIZE
    refuses the table (column mapping, the writer features only lakefeed's own commits honour:
    :func:`lakefeed.delta.rewrite.own`); nothing where lakefeed's cannot run (object storage)."""
    if rewrite.own(table):
        done = rewrite.compact(table, path, filters or None, None, policy.max_file_size)
        return done or {}
    return table.optimize.compact(
        partition_filters=filters or None, target_size=policy.max_file_size
    )


def _refresh_manifests(path: str, table: DeltaTable, before: int) -> None:
    """Delta's manifests hook after a compaction (``table``: opened after it)."""
    manifest.after_commit(path, table.metadata().configuration, before, lambda: table)


class AutoCompactor:
    """A daemon thread checking ``paths`` every ``interval`` seconds until :meth:`stop`."""

    def __init__(self, paths: Sequence[str], policy: Policy, interval: float = 30.0) -> None:
        self.paths = list(paths)
        self.policy = policy
        self.interval = interval
        self.removed: Counter[str] = Counter()  # per table: small files compacted away
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lakefeed-compaction", daemon=True)
        self._failing: set[str] = set()

    def start(self) -> AutoCompactor:
        if self.paths:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def check(self) -> None:
        """One pass over every table (the thread's work; callable directly)."""
        for path in self.paths:
            if self._stop.is_set():
                return
            try:
                self.removed[path] += compact_if_needed(path, self.policy)
                self._failing.discard(path)
            except Exception as error:  # maintenance must never fail the run
                if path not in self._failing:  # once per table until it works again
                    log.warning(f"automatic compaction of {path} failed, retried later: {error}")
                self._failing.add(path)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()
