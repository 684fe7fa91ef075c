"""RocksDB state memory, set through the pipeline configuration (``lakefeed.state.*``).

State lives in RocksDB (:mod:`lakefeed.session`), off the JVM heap: without a bound every
RocksDB instance (one per stateful operator and shuffle partition) keeps its own memtables and
block cache, so native memory grows with partitions and operators, outside ``-Xmx``. Spark can
share one LRU cache among all instances of an executor JVM (its ``RocksDBMemoryManager``);
these settings turn that on and size it, with the words of a pipeline configuration:

==================================  =========================================================
``lakefeed.state.memory``           ``512m``, ``2g``: ``rocksdb.boundedMemoryUsage=true`` and
                                    ``rocksdb.maxMemoryUsageMB`` (per executor JVM); ``off``:
                                    unbounded (Spark's default)
``lakefeed.state.writeBufferRatio`` share of that memory for memtables
                                    (``rocksdb.writeBufferCacheRatio``, Spark: 0.5)
``lakefeed.state.highPriorityRatio`` share kept for index and filter blocks
                                    (``rocksdb.highPriorityPoolRatio``, Spark: 0.1)
``lakefeed.state.writeBufferSize``  one memtable's size (``rocksdb.writeBufferSizeMB``)
``lakefeed.state.maxWriteBuffers``  memtables per instance (``rocksdb.maxWriteBufferNumber``)
``lakefeed.state.blockCacheSize``   each instance's own block cache when memory is unbounded
                                    (``rocksdb.blockCacheSizeMB``)
==================================  =========================================================

Spark creates the shared cache once per JVM, at the first stateful query, and checks the ratios
only then, inside a task; lakefeed checks everything when the pipeline loads its configuration
and sets the Spark settings before any query starts (:func:`apply`).

The bound is a target, not a hard limit: Spark 4.3's ``RocksDBMemoryManager`` builds the shared
cache as ``new LRUCache(size, -1, strictCapacityLimit=false, highPriorityPoolRatio)`` and its
``WriteBufferManager(memtables' share, cache)`` without stalling writes; neither is a setting.
So blocks pinned by open iterators and memtables being flushed can take the cache past its size
(the big-state bench measured 281 MiB under a 256 MiB bound, docs/benchmarks.md), and memory
RocksDB does not charge to the cache (table readers, compaction buffers) comes on top. Size
``lakefeed.state.memory`` about 15% under the memory state may really use.

When a run's queries have stopped, :func:`release` closes the state stores the driver's JVM
still holds (in local mode the executor is the driver): Spark leaves a stopped query's RocksDB
instances open until its maintenance task (every ``stateStore.maintenanceInterval``, 60 s) finds
them inactive, so they kept their share of the bounded memory while a next run in the same
process loaded its own, and a process that ended sooner took its JVM down with RocksDB open
and its background threads running (the big-state bench printed ``std::bad_alloc`` from
RocksDB's native code at exit, docs/benchmarks.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from lakefeed.connectors.options import Options, parse_bytes
from lakefeed.errors import OptionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREFIX = "lakefeed.state."
ROCKSDB = "spark.sql.streaming.stateStore.rocksdb."
MEMORY = PREFIX + "memory"
WRITE_BUFFER_RATIO = PREFIX + "writeBufferRatio"
HIGH_PRIORITY_RATIO = PREFIX + "highPriorityRatio"
WRITE_BUFFER_SIZE = PREFIX + "writeBufferSize"
MAX_WRITE_BUFFERS = PREFIX + "maxWriteBuffers"
BLOCK_CACHE_SIZE = PREFIX + "blockCacheSize"
KEYS = (
    MEMORY,
    WRITE_BUFFER_RATIO,
    HIGH_PRIORITY_RATIO,
    WRITE_BUFFER_SIZE,
    MAX_WRITE_BUFFERS,
    BLOCK_CACHE_SIZE,
)
UNBOUNDED = ("off", "unbounded")
MIB = 1 << 20
# Spark's defaults, which the checks of the shares need when only one is given.
SPARK_WRITE_BUFFER_RATIO = 0.5
SPARK_HIGH_PRIORITY_RATIO = 0.1


class StateMemoryError(OptionError):
    """A ``lakefeed.state.*`` setting Spark's RocksDB state store cannot take."""

    code = "STATE_MEMORY"


@dataclass(frozen=True)
class StateMemory:
    """The RocksDB memory settings of a pipeline (None: Spark's own default)."""

    bounded_mib: int | None = None
    unbounded: bool = False
    write_buffer_ratio: float | None = None
    high_priority_ratio: float | None = None
    write_buffer_mib: int | None = None
    max_write_buffers: int | None = None
    block_cache_mib: int | None = None

    @classmethod
    def from_config(cls, get: Callable[[str], str | None]) -> StateMemory:
        """Read and check the settings (``get``: the pipeline configuration's lookup)."""
        opts = Options({key: get(key) for key in KEYS}, error=StateMemoryError)
        raw_memory = opts.get(MEMORY)
        unbounded = raw_memory is not None and raw_memory.strip().lower() in UNBOUNDED
        memory = None if unbounded else _mib(opts, MEMORY, " (or 'off')")
        settings = cls(
            bounded_mib=memory,
            unbounded=unbounded,
            write_buffer_ratio=_share(opts, WRITE_BUFFER_RATIO),
            high_priority_ratio=_share(opts, HIGH_PRIORITY_RATIO),
            write_buffer_mib=_mib(opts, WRITE_BUFFER_SIZE),
            max_write_buffers=opts.positive_int(MAX_WRITE_BUFFERS),
            block_cache_mib=_mib(opts, BLOCK_CACHE_SIZE),
        )
        settings.check()
        return settings

    def check(self) -> None:
        """Refuse combinations Spark would reject at the first stateful task, or ignore."""
        shares = self.write_buffer_ratio is not None or self.high_priority_ratio is not None
        if shares and self.bounded_mib is None:
            _refuse(
                f"{WRITE_BUFFER_RATIO} and {HIGH_PRIORITY_RATIO} are shares of {MEMORY}, "
                "which is not set",
                f"set {MEMORY} (e.g. 512m) too, or drop the ratios",
            )
        if self.block_cache_mib is not None and self.bounded_mib is not None:
            _refuse(
                f"{BLOCK_CACHE_SIZE} sizes each instance's own cache, unused when {MEMORY} "
                "bounds one shared cache",
                f"drop {BLOCK_CACHE_SIZE}, or set {MEMORY}=off",
            )
        write = _or(self.write_buffer_ratio, SPARK_WRITE_BUFFER_RATIO)
        if shares and write + _or(self.high_priority_ratio, SPARK_HIGH_PRIORITY_RATIO) >= 1:
            _refuse(
                f"{WRITE_BUFFER_RATIO} + {HIGH_PRIORITY_RATIO} must stay below 1 "
                f"(Spark's defaults: {SPARK_WRITE_BUFFER_RATIO} and {SPARK_HIGH_PRIORITY_RATIO})",
                "lower one of them, e.g. writeBufferRatio=0.5 and highPriorityRatio=0.1",
            )
        if self.bounded_mib is not None and self.write_buffer_mib is not None:
            budget = self.bounded_mib * write
            if self.write_buffer_mib > budget:
                _refuse(
                    f"{WRITE_BUFFER_SIZE}={self.write_buffer_mib} MiB is more than the memtables' "
                    f"share of {MEMORY} ({budget:.0f} MiB): every memtable would be flushed "
                    "before it fills",
                    f"lower {WRITE_BUFFER_SIZE} or raise {MEMORY} / {WRITE_BUFFER_RATIO}",
                )

    def spark_conf(self) -> dict[str, str]:
        """Spark's settings for these (only those given)."""
        conf: dict[str, str] = {}
        if self.bounded_mib is not None:
            conf[ROCKSDB + "boundedMemoryUsage"] = "true"
            conf[ROCKSDB + "maxMemoryUsageMB"] = str(self.bounded_mib)
        elif self.unbounded:
            conf[ROCKSDB + "boundedMemoryUsage"] = "false"
        named = {
            "writeBufferCacheRatio": self.write_buffer_ratio,
            "highPriorityPoolRatio": self.high_priority_ratio,
            "writeBufferSizeMB": self.write_buffer_mib,
            "maxWriteBufferNumber": self.max_write_buffers,
            "blockCacheSizeMB": self.block_cache_mib,
        }
        conf.update({ROCKSDB + k: str(value) for k, value in named.items() if value is not None})
        return conf


def apply(spark: SparkSession, get: Callable[[str], str | None], keys: list[str]) -> None:
    """Check the pipeline's ``lakefeed.state.*`` settings and set Spark's for them on ``spark``.

    ``keys`` are the configuration's keys: one under ``lakefeed.state.`` that lakefeed does not
    know (a typo) is refused rather than silently leaving the memory unbounded.
    """
    unknown = sorted(k for k in keys if k.startswith(PREFIX) and k not in KEYS)
    if unknown:
        _refuse(
            f"unknown state setting {', '.join(unknown)}",
            "use one of " + ", ".join(KEYS),
        )
    for key, value in StateMemory.from_config(get).spark_conf().items():
        spark.conf.set(key, value)


def release(spark: SparkSession) -> None:
    """Close the state stores loaded in this JVM, once no query of ``spark`` is active.

    Only between runs: a store in use by an active query must stay open (a query of another
    session of the same JVM is not seen here; lakefeed runs a pipeline in one session). The next
    stateful query loads its stores from its checkpoint, as it would anyway (a store belongs to
    one run of a query). Without a JVM (Spark Connect) the server owns its stores.
    """
    jvm = getattr(spark, "_jvm", None)
    if jvm is None or spark.streams.active:
        return
    jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()


def _mib(opts: Options, name: str, also: str = "") -> int | None:
    """A size option in whole MiB (rounded up: Spark's settings are in MB)."""
    raw = opts.get(name)
    if raw is None:
        return None
    size = parse_bytes(raw)
    if size is None or size < MIB:
        opts.fail(name, raw, f"must be a size of at least 1m, like 512m or 2g{also}")
    return math.ceil(size / MIB)


def _share(opts: Options, name: str) -> float | None:
    value = opts.number(name)
    if value is not None and not 0 < value < 1:
        opts.fail(name, str(value), "must be a fraction between 0 and 1, like 0.5")
    return value


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _refuse(message: str, fix: str) -> NoReturn:
    raise StateMemoryError(message, fix=fix)
