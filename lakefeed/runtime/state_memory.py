"""RocksDB state memory, set through the pipeline configuration (``lakefeed.state.*``).

State lives in RocksDB (:mod:`lakefeed.spark.session`), off the JVM heap: without a bound every
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

**Sizing: a store's bloom filter must fit one shard of the cache.** Under a bound Spark keeps
RocksDB's index and filter blocks in the shared cache (``cache_index_and_filter_blocks``), and
the cache is an ``LRUCache`` of 64 shards (RocksDB's default for 32 MiB and more), each holding
1/64 of the bound. An SST file has one bloom filter block of 10 bits per key (Spark's
``BloomFilter()``), so after compaction a state store's big file carries a filter of ~1.25 bytes
per key of that store in a single block (plus ~0.2 bytes of index), up to RocksDB's 64 MiB file
target. The memtables are charged to the same cache in pinned 256 KiB entries spread over the
shards. Once a shard's pinned entries leave less room than the filter it should hold, the cache
(not strict) drops the filter as soon as a lookup releases it: every lookup in that store reads
and parses the whole filter again. Measured (docs/benchmarks.md, "Big state, round 5"): block
cache misses equal to the lookups, ~10 GB of filter blocks inserted per batch, batches 10-20x
slower (the 256m run at 10 million keys over 4 partitions: 33 and 40 s instead of 2 s). None of
it is a Spark setting, so lakefeed sizes instead: :func:`rows_per_store` is what a bound holds
(the largest filter and one reservation entry within a shard's share left by the memtables),
:func:`memory_for` the bound rows need, and :class:`StateSizing` warns once per flow, from the
query progress, when a stateful operator's stores outgrow it or its lookups miss the cache.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from lakefeed.core import config
from lakefeed.core.options import Options, parse_bytes
from lakefeed.runtime.errors import StateMemoryError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PREFIX = "lakefeed.state."
ROCKSDB = "spark.sql.streaming.stateStore.rocksdb."
MEMORY = config.STATE_MEMORY.key
WRITE_BUFFER_RATIO = config.STATE_WRITE_BUFFER_RATIO.key
HIGH_PRIORITY_RATIO = config.STATE_HIGH_PRIORITY_RATIO.key
WRITE_BUFFER_SIZE = config.STATE_WRITE_BUFFER_SIZE.key
MAX_WRITE_BUFFERS = config.STATE_MAX_WRITE_BUFFERS.key
BLOCK_CACHE_SIZE = config.STATE_BLOCK_CACHE_SIZE.key
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


# --- sizing: what a bound holds (module docstring: a store's filter must fit a cache shard) ---

MIN_SHARD = 512 << 10  # RocksDB's default LRU cache shards hold at least this much...
MAX_SHARD_BITS = 6  # ... and there are at most 64 of them
RESERVATION = 256 << 10  # the write buffer manager charges memtables to the cache in these
FILTER_INDEX_BYTES = 1.5  # per key of an SST file: bloom filter 10 bits + index ~0.2 (measured)
TARGET_FILE_BYTES = 64 * MIB  # compaction splits files here (RocksDB's target_file_size_base)
# A thrashing cache, as measured: one store of four rereading its filter on every lookup is
# ~0.25 misses a lookup at 70-100 us a lookup (a healthy batch: under 0.05 and 1-5 us).
THRASH_MISSES = 0.1  # block cache misses per lookup...
THRASH_LOOKUP_MS = 0.02  # ... and milliseconds per lookup, both at least
MIN_LOOKUPS = 10_000  # a batch with fewer lookups says nothing about the cache


def cache_shards(capacity: int) -> int:
    """The shards of RocksDB's ``LRUCache`` of ``capacity`` bytes as Spark builds it
    (``numShardBits=-1``: shards of at least 512 KiB, at most 64)."""
    bits, shards = 0, capacity // MIN_SHARD
    while shards > 1 and bits < MAX_SHARD_BITS:
        shards >>= 1
        bits += 1
    return 1 << bits


def rows_per_store(memory_mib: int, write_buffer_ratio: float = SPARK_WRITE_BUFFER_RATIO) -> int:
    """Keys a state store's largest file may hold under a bound of ``memory_mib`` while its
    filter and index still fit a cache shard beside the memtables' share and one reservation."""
    capacity = memory_mib * MIB
    room = capacity / cache_shards(capacity) * (1 - write_buffer_ratio) - RESERVATION
    return max(0, int(room / FILTER_INDEX_BYTES))


def memory_for(rows: float, write_buffer_ratio: float = SPARK_WRITE_BUFFER_RATIO) -> int:
    """The bound, in MiB and a multiple of 64, under which a store's file of ``rows`` keys keeps
    its filter cached (the inverse of :func:`rows_per_store` at 64 shards)."""
    shard = (rows * FILTER_INDEX_BYTES + RESERVATION) / (1 - write_buffer_ratio)
    return 64 * math.ceil(shard * (1 << MAX_SHARD_BITS) / MIB / 64)


@dataclass(frozen=True)
class SizingWarning:
    """A stateful operator outgrowing the bound (``kind``: ``outgrown`` or ``thrashing``)."""

    kind: str
    message: str
    details: dict[str, Any]


@dataclass(frozen=True)
class StateSizing:
    """Spark's RocksDB bound on a session, held against each micro-batch's state."""

    memory_mib: int
    write_buffer_ratio: float = SPARK_WRITE_BUFFER_RATIO

    @classmethod
    def of(cls, get: Callable[[str], str | None]) -> StateSizing | None:
        """From Spark's settings (``get``: the session's conf lookup); None when RocksDB's memory
        is not bounded: then each file's filter lives with its reader, outside any cache."""
        if (get(ROCKSDB + "boundedMemoryUsage") or "").strip().lower() != "true":
            return None
        memory = int(get(ROCKSDB + "maxMemoryUsageMB") or 500)  # Spark's default
        ratio = get(ROCKSDB + "writeBufferCacheRatio")
        return cls(memory, float(ratio) if ratio else SPARK_WRITE_BUFFER_RATIO)

    def warnings(self, progress: Mapping[str, Any]) -> list[SizingWarning]:
        """What a batch's progress (its JSON, as a dict) says about the bound, per RocksDB
        stateful operator: stores grown past :func:`rows_per_store`, lookups missing the cache."""
        found = []
        for operator in progress.get("stateOperators") or []:
            metrics = operator.get("customMetrics") or {}
            if "rocksdbGetCount" not in metrics:
                continue  # not RocksDB
            found.extend(self._outgrown(operator, metrics))
            found.extend(self._thrashing(operator, metrics, progress.get("batchId")))
        return found

    def _outgrown(self, operator: Mapping[str, Any], metrics: Mapping) -> list[SizingWarning]:
        rows = int(operator.get("numRowsTotal") or 0)
        partitions = max(1, int(operator.get("numShufflePartitions") or 1))
        sst = float(metrics.get("rocksdbSstFileSize") or 0)
        per_file = rows / partitions
        if sst:  # compaction splits files at the target size: no filter outgrows that
            per_file = min(per_file, TARGET_FILE_BYTES * rows / sst)
        limit = rows_per_store(self.memory_mib, self.write_buffer_ratio)
        if per_file <= limit:
            return []
        need = memory_for(per_file * 1.5, self.write_buffer_ratio)
        name = operator.get("operatorName", "stateful operator")
        return [
            SizingWarning(
                "outgrown",
                f"{name}: {rows:,} state rows over {partitions} partitions; under "
                f"{MEMORY}={self.memory_mib}m a state store keeps its RocksDB bloom filter "
                f"cached up to about {limit:,} rows, past that lookups may reread it (batches "
                f"10-20x slower). Set {MEMORY}={need}m (this state and half again), or lower "
                f"{WRITE_BUFFER_RATIO}, or start the flow's checkpoint with more "
                "spark.sql.shuffle.partitions",
                {
                    "operator": name,
                    "state_rows": rows,
                    "partitions": partitions,
                    "rows_per_store_limit": limit,
                    "memory_mib": self.memory_mib,
                    "advised_memory_mib": need,
                },
            )
        ]

    def _thrashing(
        self, operator: Mapping[str, Any], metrics: Mapping, batch_id: Any
    ) -> list[SizingWarning]:
        gets = int(metrics.get("rocksdbGetCount") or 0)
        misses = int(metrics.get("rocksdbReadBlockCacheMissCount") or 0)
        lookup_ms = float(metrics.get("rocksdbGetLatency") or 0)  # summed over the stores
        if gets < MIN_LOOKUPS or misses < THRASH_MISSES * gets:
            return []
        if lookup_ms < THRASH_LOOKUP_MS * gets:  # misses of data blocks, read fast
            return []
        name = operator.get("operatorName", "stateful operator")
        return [
            SizingWarning(
                "thrashing",
                f"{name}: batch {batch_id} missed RocksDB's block cache {misses:,} times in "
                f"{gets:,} lookups, which took {lookup_ms / gets * 1000:.0f} us each: the "
                f"state's filter blocks do not stay in the {self.memory_mib}m cache. Raise "
                f"{MEMORY}",
                {
                    "operator": name,
                    "batch_id": batch_id,
                    "lookups": gets,
                    "misses": misses,
                    "lookup_ms": lookup_ms,
                    "memory_mib": self.memory_mib,
                },
            )
        ]


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
