"""Spark-free: plan facts read from a printed plan (Spark Connect) equal those read over Py4J,
and ``--remote`` misuse is refused before any session starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lakefeed.cli.main import cli
from lakefeed.core.errors import ConfigError
from lakefeed.observe.figures import Monitor
from lakefeed.runtime.evaluate import _walk_text
from lakefeed.spark import connect
from lakefeed.spark.plan_text import analyzed_tree, bracket_items
from tests.pipeline.support import IOT
from tests.support.net import free_port

# explain(extended=True) of a windowed count over a deduplicated stream, from a Connect server
# (the Project line shortened: the window's expression is long)
EXPLAIN = """== Parsed Logical Plan ==
'Aggregate ['window, 'device_id]
== Analyzed Logical Plan ==
window: struct<start:timestamp,end:timestamp>, device_id: string, n: bigint
~Aggregate [window#76-T120000ms, device_id#71], [window#76-T120000ms, device_id#71, count(1) AS n#72L]
+- ~Project [named_struct(start, floor(event_time#70-T120000ms, 300), end, 1) AS window#76-T120000ms, event_id#69, device_id#71]
   +- ~Filter isnotnull(event_time#70-T120000ms)
      +- ~Join Inner, (event_id#69 = event_id#85)
         :- ~DeduplicateWithinWatermark [event_id#69]
         :  +- ~EventTimeWatermark 5406, event_time#70: timestamp, 2 minutes
         :     +- ~StreamingRelationV2 lakefeed_iot, [totalRows=50], [offset#64L, value#67]
         +- ~Project [event_id#85]
            +- ~StreamingRelationV2 lakefeed_iot, [totalRows=50], [offset#64L, value#67]

== Optimized Logical Plan ==
Aggregate [window#76]
"""  # noqa: E501


def test_a_printed_plan_gives_the_facts_py4j_gives() -> None:
    root = analyzed_tree(EXPLAIN)
    names: list[str] = []
    stateful: list[str] = []
    _walk_text(root, names, stateful)
    assert names == [
        "Aggregate", "Project", "Filter", "Join", "DeduplicateWithinWatermark",
        "EventTimeWatermark", "StreamingRelationV2", "Project", "StreamingRelationV2",
    ]  # fmt: skip
    # the strings evaluate._walk builds from the plan objects (ids dropped, keys' definitions)
    assert stateful == [
        "~Aggregate [window, device_id], [window, device_id, count(1) AS n] keys: "
        "named_struct(start, floor(event_time, 300), end, 1) AS window",
        "~Join Inner, (event_id = event_id)",
        "~DeduplicateWithinWatermark [event_id]",
    ]


def test_bracket_items_split_at_top_level_commas_only() -> None:
    items = bracket_items("Project [f(a, b) AS x#1, c#2, [d, e]]")
    assert items == ["f(a, b) AS x#1", "c#2", "[d, e]"]
    assert bracket_items("Filter x") == []


def test_remote_and_master_together_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as refused:
        connect.remote_url("sc://127.0.0.1:15002", "local[2]")
    assert refused.value.code == connect.BOTH_TARGETS
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    assert connect.remote_url(None, None) == "sc://127.0.0.1:15002"
    assert connect.remote_url(None, "local[2]") is None  # an explicit master wins over the env


def test_an_unreachable_server_is_refused_with_its_fix() -> None:
    with pytest.raises(ConfigError) as refused:
        connect.check_server(f"sc://127.0.0.1:{free_port()}", timeout=1)
    assert refused.value.code == connect.UNREACHABLE
    with pytest.raises(ConfigError):
        connect.check_server("http://127.0.0.1:15002")


def test_status_says_where_a_run_ran_and_which_delta_reader_read() -> None:
    facts = {"api": "connect", "server": "sc://127.0.0.1:15002", "delta_reader": "python"}
    monitor = Monitor()
    monitor.apply(
        {"pipeline": "p", "event_type": "run_start", "run_id": "r", "details": {"spark": facts}}
    )
    shown = monitor.snapshot(0.0)["pipelines"][0]["spark"]
    assert shown == "Spark Connect sc://127.0.0.1:15002 · Delta reader python"


def test_the_cli_refuses_remote_with_master_before_spark_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["run", str(IOT), "--lakehouse", str(tmp_path), "--remote", "sc://127.0.0.1:1",
         "--master", "local[1]"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "CONNECT_AND_MASTER" in result.output


def test_a_query_start_is_retried_only_when_the_servers_worker_was_late() -> None:
    calls: list[int] = []

    def late_twice() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError(f"SparkException: {connect.WORKER_LATE}.")
        return "query"

    assert connect.start_query(late_twice) == "query" and len(calls) == 3
    with pytest.raises(ValueError):
        connect.start_query(lambda: (_ for _ in ()).throw(ValueError("bad option")))
    calls.clear()
    with pytest.raises(RuntimeError):
        connect.start_query(late_twice, attempts=2)  # the last attempt's error is raised


class _Conf:
    """A Connect session's ``conf``: session settings modifiable, ``spark.scheduler.*`` not."""

    def __init__(self) -> None:
        self.values = {"spark.scheduler.mode": "FIFO"}

    def isModifiable(self, key: str) -> bool:  # noqa: N802 - pyspark's name
        return key.startswith("spark.sql.")

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


def test_settings_only_the_server_start_sets_are_reported_not_failed() -> None:
    spark = type("Session", (), {"conf": _Conf()})()
    wanted = {"spark.sql.session.timeZone": "UTC", "spark.scheduler.mode": "FAIR"}
    assert connect.apply_conf(spark, wanted) == ["spark.scheduler.mode"]
    assert spark.conf.values["spark.sql.session.timeZone"] == "UTC"
