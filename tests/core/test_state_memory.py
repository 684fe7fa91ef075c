"""RocksDB memory settings: lakefeed.state.* mapped to Spark's, misuse refused (no Spark)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from lakefeed.runtime.state_memory import ROCKSDB, StateMemory, StateMemoryError, apply


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
