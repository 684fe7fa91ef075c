"""A shared session's runtime confs are back as they were after a pipeline's run (Spark-free:
a stand-in for ``spark.conf``)."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from lakefeed.spark.session import conf_restored


class _Conf:
    """``spark.conf``'s ``getAll`` / ``set`` / ``unset`` over a dict."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.stopped = False

    @property
    def getAll(self) -> dict[str, str]:  # noqa: N802 - pyspark's name
        if self.stopped:
            raise RuntimeError("SparkContext was shut down")
        return dict(self.values)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


class _Session:
    def __init__(self, values: dict[str, str]) -> None:
        self.conf = _Conf(values)


def _session(values: dict[str, str]) -> Any:
    return cast(Any, _Session(values))


def test_confs_set_changed_or_unset_in_the_block_are_back_after_it() -> None:
    spark = _session({"spark.sql.shuffle.partitions": "4", "spark.app.name": "shared"})
    with conf_restored(spark):
        spark.conf.set("spark.sql.shuffle.partitions", "7")
        spark.conf.set("spark.sql.ansi.enabled", "false")
        spark.conf.unset("spark.app.name")
    assert spark.conf.values == {"spark.sql.shuffle.partitions": "4", "spark.app.name": "shared"}


def test_confs_are_back_after_a_failed_run() -> None:
    spark = _session({})
    with pytest.raises(ValueError, match="boom"), conf_restored(spark):
        spark.conf.set("shop.region", "north")
        raise ValueError("boom")
    assert spark.conf.values == {}


def test_a_session_stopped_under_the_run_is_left_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    spark = _session({"a": "1"})
    with caplog.at_level(logging.WARNING), conf_restored(spark):
        spark.conf.stopped = True
    assert "Spark confs not restored" in caplog.text
