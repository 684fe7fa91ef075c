"""RocksDB memory settings: lakefeed.state.* mapped to Spark's, misuse refused (no Spark)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from lakefeed.runtime.event_log import EventLog, read_events
from lakefeed.runtime.listener import ProgressListener
from lakefeed.runtime.state_memory import (
    ROCKSDB,
    StateMemory,
    StateMemoryError,
    StateSizing,
    apply,
    cache_shards,
    memory_for,
    rows_per_store,
)


def _conf(**settings: str) -> dict[str, str]:
    given = {f"lakefeed.state.{key}": value for key, value in settings.items()}
    return StateMemory.from_config(given.get).spark_conf()


def test_memory_bounds_one_shared_cache_in_whole_mib() -> None:
    assert _conf(memory="2g", writeBufferRatio="0.4", highPriorityRatio="0.2") == {
        ROCKSDB + "boundedMemoryUsage": "true",
        ROCKSDB + "maxMemoryUsageMB": "2048",
        ROCKSDB + "writeBufferCacheRatio": "0.4",
        ROCKSDB + "highPriorityPoolRatio": "0.2",
    }
    assert _conf(memory="1.5m")[ROCKSDB + "maxMemoryUsageMB"] == "2"  # rounded up
    assert _conf(memory="512m", writeBufferSize="64m", maxWriteBuffers="3") == {
        ROCKSDB + "boundedMemoryUsage": "true",
        ROCKSDB + "maxMemoryUsageMB": "512",
        ROCKSDB + "writeBufferSizeMB": "64",
        ROCKSDB + "maxWriteBufferNumber": "3",
    }


def test_unset_leaves_spark_defaults_and_off_unbounds() -> None:
    assert _conf() == {}
    assert _conf(memory="OFF", blockCacheSize="32m") == {
        ROCKSDB + "boundedMemoryUsage": "false",
        ROCKSDB + "blockCacheSizeMB": "32",
    }


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"memory": "lots"}, "at least 1m"),
        ({"memory": "100k"}, "at least 1m"),
        ({"memory": "1g", "writeBufferRatio": "1.5"}, "between 0 and 1"),
        ({"writeBufferRatio": "0.3"}, "which is not set"),
        ({"memory": "1g", "writeBufferRatio": "0.6", "highPriorityRatio": "0.4"}, "below 1"),
        ({"memory": "1g", "writeBufferRatio": "0.95"}, "below 1"),  # with Spark's 0.1
        ({"memory": "1g", "blockCacheSize": "64m"}, "unused"),
        ({"memory": "256m", "writeBufferSize": "200m"}, "flushed before it fills"),
        ({"maxWriteBuffers": "0"}, "positive integer"),
    ],
)
def test_misuse_is_refused_with_the_fix(settings: dict[str, str], says: str) -> None:
    with pytest.raises(StateMemoryError, match=says) as caught:
        _conf(**settings)
    assert "STATE_MEMORY" in str(caught.value)


class _Conf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class _Session:
    def __init__(self) -> None:
        self.conf = _Conf()


def test_apply_sets_the_session_and_refuses_an_unknown_state_key() -> None:
    session = _Session()
    given = {"lakefeed.state.memory": "300m", "other.key": "x"}
    apply(cast(Any, session), given.get, list(given))
    assert session.conf.values == {
        ROCKSDB + "boundedMemoryUsage": "true",
        ROCKSDB + "maxMemoryUsageMB": "300",
    }
    typo = {"lakefeed.state.memroy": "300m"}
    with pytest.raises(StateMemoryError, match="unknown state setting lakefeed.state.memroy"):
        apply(cast(Any, session), typo.get, list(typo))


# --- sizing: a state store's bloom filter must fit one shard of the bounded cache ------------

GIB = 1 << 30


def _progress(
    rows: int, *, gets: int = 0, misses: int = 0, get_ms: float = 0, sst: int = 0
) -> dict[str, Any]:
    """A batch's progress JSON as Spark writes it for a RocksDB stateful operator."""
    metrics = {"rocksdbGetCount": gets, "rocksdbReadBlockCacheMissCount": misses}
    metrics |= {"rocksdbGetLatency": get_ms, "rocksdbSstFileSize": sst}
    operator = {"operatorName": "transformWithStateExec", "numRowsTotal": rows}
    operator |= {"numShufflePartitions": 4, "customMetrics": metrics}
    return {"batchId": 39, "stateOperators": [operator]}


def test_cache_shards_as_rocksdb_builds_them() -> None:
    assert [cache_shards(size) for size in (1 << 20, 16 << 20, 64 << 20, 256 << 20, GIB)] == [
        2,
        32,
        64,
        64,
        64,
    ]


def test_the_bound_a_state_needs_follows_the_runs_measured() -> None:
    """docs/benchmarks.md, "Big state, round 5": 10M keys over 4 partitions (2.5M a store)
    thrashed under 256m and held under 512m; at 64m a store's file of ~290k keys thrashed."""
    assert memory_for(2_500_000) == 512
    assert rows_per_store(512) >= 2_500_000 > rows_per_store(256)
    assert rows_per_store(64) < 289_000
    assert rows_per_store(memory_for(1_000_000)) >= 1_000_000
    # less of the cache for memtables leaves each shard more room for filters
    assert rows_per_store(256, write_buffer_ratio=0.25) > rows_per_store(256)


def test_sizing_reads_sparks_bound_and_skips_unbounded_memory() -> None:
    assert StateSizing.of({}.get) is None
    assert StateSizing.of({ROCKSDB + "boundedMemoryUsage": "false"}.get) is None
    bounded = {ROCKSDB + "boundedMemoryUsage": "true", ROCKSDB + "maxMemoryUsageMB": "256"}
    assert StateSizing.of(bounded.get) == StateSizing(256, 0.5)
    bounded[ROCKSDB + "writeBufferCacheRatio"] = "0.25"
    assert StateSizing.of(bounded.get) == StateSizing(256, 0.25)


def test_sizing_warns_when_stores_outgrow_the_bound_or_miss_the_cache() -> None:
    # the idle full run's batch 39 under 256m: 9.75M rows, 529k lookups taking 38 s, 130k misses
    full = _progress(9_754_096, gets=529_144, misses=130_289, get_ms=38_085, sst=86_805_613)
    outgrown, thrashing = StateSizing(256).warnings(full)
    assert (outgrown.kind, thrashing.kind) == ("outgrown", "thrashing")
    assert "lakefeed.state.memory=704m" in outgrown.message, outgrown.message
    assert outgrown.details["rows_per_store_limit"] == rows_per_store(256)
    assert "130,289 times in 529,144 lookups, which took 72 us each" in thrashing.message
    assert "Raise lakefeed.state.memory" in thrashing.message
    # batch 37 of that run, before the thrash: as many misses would be data blocks, read fast
    assert [
        w.kind
        for w in StateSizing(256).warnings(
            {**full, "batchId": 37}
            | _progress(9_504_096, gets=529_000, misses=60_000, get_ms=900, sst=86_805_613)
        )
    ] == ["outgrown"]
    # the same state fits 512m; a few lookups say nothing; other state stores are not RocksDB
    assert StateSizing(512).warnings(_progress(10_000_000, gets=5_000, misses=5_000)) == []
    hdfs = {"stateOperators": [{"numRowsTotal": 10**9, "customMetrics": {}}]}
    assert StateSizing(64).warnings(hdfs) == []


def test_compaction_splits_files_so_filters_stop_growing() -> None:
    """Past RocksDB's 64 MiB file target a store's keys spread over files: at 10 bytes a row
    on disk no file holds more than ~6.7M keys, whatever the store holds."""
    rows = 400_000_000  # 100M a store
    kinds = StateSizing(2048).warnings(_progress(rows, sst=rows * 10))
    assert kinds == [] and rows_per_store(2048) > 64 * 2**20 / 10


def test_the_listener_warns_once_per_flow_and_kind(tmp_path: Any) -> None:
    events = EventLog(str(tmp_path / "events"), "p")
    listener = ProgressListener(events, {}, StateSizing(64))
    listener.flows = {"dedup"}
    for batch in (1, 2):
        listener.catch_up(
            _Query("dedup", batch, _progress(2_000_000, gets=50_000, misses=40_000, get_ms=4_000))
        )
    events.flush()
    warned = [e for e in read_events(str(tmp_path / "events")) if e["event_type"] == "state_memory"]
    assert sorted(e["details"]["kind"] for e in warned) == ["outgrown", "thrashing"]
    assert {e["level"] for e in warned} == {"WARN"}


class _Query:
    def __init__(self, name: str, batch: int, progress: dict[str, Any]) -> None:
        body = {**progress, "batchId": batch}
        self.recentProgress = [
            SimpleNamespace(
                name=name,
                runId="r",
                batchId=batch,
                numInputRows=1,
                json=json.dumps(body),
                observedMetrics={},
            )
        ]
