"""Spark-free checks of the deployment bench's pure parts (bench/deploy/figures.py): verdicts,
Spark task metrics from an event log, S3 requests from moto's access log. Milliseconds.

No smoke run: the bench starts a standalone cluster and moto and runs six Spark sessions, which
takes minutes even on tiny input (``python -m bench.deploy.run --quick``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from bench.deploy import figures


def test_verdicts_compare_medians_against_the_target() -> None:
    met = figures.verdict(figures.CLUSTER, [100.0, 90.0, 110.0], [95.0, 20.0, 88.0])
    assert met.startswith("cluster / local[2] = 0.88x (target >= 0.85: MET")
    missed = figures.verdict(figures.S3, [100.0], [60.0])
    assert "0.60x" in missed and "MISSED" in missed
    assert "MISSED" in figures.verdict(figures.S3, [100.0], [])  # a failed leg never meets it
    assert math.isnan(figures.ratio([], [1.0]))


def test_rate_line_shows_median_rate_time_and_every_run() -> None:
    line = figures.rate_line("delta-s3 delta-sink", [1000.0, 3000.0, 2000.0], [4.0, 2.0, 3.0])
    assert "2,000 rows/s" in line and "3.00 s" in line and "(runs: 1,000, 3,000, 2,000)" in line
    assert "no successful run" in figures.rate_line("x", [], [])


def _task_end(
    launch: int, finish: int, executor: str, reason: str = "Success", stage: int = 0
) -> str:
    return json.dumps(
        {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": stage,
            "Task End Reason": {"Reason": reason},
            "Task Info": {
                "Launch Time": launch,
                "Finish Time": finish,
                "Getting Result Time": 0,
                "Executor ID": executor,
            },
            "Task Metrics": {
                "Executor Deserialize Time": 5,
                "Executor Deserialize CPU Time": 2_000_000,
                "Executor Run Time": 80,
                "Result Serialization Time": 1,
                "JVM GC Time": 2,
                "Shuffle Read Metrics": {"Fetch Wait Time": 3, "Remote Bytes Read": 2**20},
            },
        }
    )


def test_task_times_split_wall_time_into_scheduler_delay_and_work(tmp_path: Path) -> None:
    log = [
        json.dumps({"Event": "SparkListenerApplicationStart"}),
        _task_end(1000, 1100, "0"),  # 100 ms: 80 run + 5 deserialize + 1 result -> 14 delay
        _task_end(2000, 2090, "1"),  # 90 ms -> 4 delay
        _task_end(3000, 9000, "1", reason="ExecutorLostFailure"),  # not counted
    ]
    (tmp_path / "app-1").write_text("\n".join(log))
    times = figures.read_task_times(tmp_path)
    assert (times.tasks, times.wall_ms, times.run_ms, times.scheduler_ms) == (2, 190, 160, 18)
    assert times.executors == {"0", "1"} and times.remote_shuffle_bytes == 2 * 2**20
    assert "remote shuffle 2,048 KiB" in times.line("delta-cluster")
    assert "2 tasks, 2 executor(s)" in times.line("delta-cluster")
    assert "scheduler delay   9.0" in times.line("delta-cluster")
    assert "no task metrics" in figures.read_task_times(tmp_path / "missing").line("x")


def _job_start(stages: list[int], query: str | None) -> str:
    properties = {"sql.streaming.queryId": query} if query else {}
    return json.dumps(
        {"Event": "SparkListenerJobStart", "Stage IDs": stages, "Properties": properties}
    )


def test_task_times_per_measured_query_leave_warm_up_and_check_out() -> None:
    log = [
        _job_start([0], None),  # lakefeed's executor check
        _task_end(0, 900, "0", stage=0),
        _job_start([1], "warm-up-id"),
        _task_end(1000, 1500, "0", stage=1),
        _job_start([2, 3], "measured-id"),
        _task_end(2000, 2100, "0", stage=2),
        _task_end(2000, 2090, "1", stage=3),
    ]
    found = figures.query_task_times(log, {"measured-id": "delta-0"})
    assert list(found) == ["delta-0"] and found["delta-0"].tasks == 2
    assert "deserialize   5.0 (CPU  2.0)" in found["delta-0"].line("delta-0")
    assert figures.task_times(log).tasks == 4


REQUESTS = [
    ("PUT", "/deploy-1/run-0/delta-out-99/_delta_log/00000.json"),  # warm-up run: left out
    ("PUT", "/deploy-1/run-0/delta-out-0/_delta_log/00000.json"),
    ("GET", "/deploy-1?list-type=2&prefix=run-0%2Fdelta-out-0%2F_delta_log%2F"),
    ("PUT", "/deploy-1/run-0/delta-cp-0/offsets/0"),
    ("HEAD", "/deploy-1/run-0/delta-cp-0/commits/0"),
    ("PUT", "/deploy-1/run-0/delta-out-0/_lakefeed_staging/q-1/part-0.parquet"),
    ("PUT", "/deploy-1/run-0/delta-out-0/part-0001.c000.snappy.parquet"),
    ("PUT", "/deploy-1/run-1/parquet-out-1/_spark_metadata/0"),
    ("PUT", "/latency-1/probe/000.json"),  # not a leg's: left out
]
MOTO_LOG = [f'127.0.0.1 - - [25/Nov/2026 15:40:00] "{m} {t} HTTP/1.1" 200 -' for m, t in REQUESTS]
COLOURED = [  # werkzeug colours a 404 and a 206 (what S3A's probes and footer reads get)
    '127.0.0.1 - - [26/Nov/2026 12:12:31] "\x1b[33mHEAD /deploy-1/run-1/delta-cp-0/offsets/1'
    ' HTTP/1.1\x1b[0m" 404 -',
    '127.0.0.1 - - [26/Nov/2026 12:12:35] "\x1b[35m\x1b[1mGET /deploy-1/run-1/delta-out-0/'
    'part-0001.c000.snappy.parquet HTTP/1.1\x1b[0m" 206 -',
]


def test_s3_requests_are_counted_per_leg_object_kind_and_operation() -> None:
    found = figures.s3_requests([*MOTO_LOG, "werkzeug noise without a request"])
    delta = found.per_run("delta")
    assert delta == {
        ("Delta log", "PUT"): 1,
        ("Delta log", "LIST"): 1,
        ("Spark checkpoint", "PUT"): 1,
        ("Spark checkpoint", "HEAD"): 1,
        ("staging", "PUT"): 1,
        ("data files", "PUT"): 1,
    }
    assert found.per_run("parquet") == {("parquet sink log", "PUT"): 1}
    lines = found.lines("delta", batches=2)
    assert lines[0] == "  delta: 6 requests per run, 3.0 per batch"


def test_coloured_requests_count_and_each_repeat_is_a_run() -> None:
    found = figures.s3_requests([*MOTO_LOG, *COLOURED])
    assert found.attempts["delta"] == {"/deploy-1/run-0/0", "/deploy-1/run-1/0"}
    delta = found.per_run("delta")  # two runs: run-0's six requests and run-1's two, halved
    assert delta[("Spark checkpoint", "HEAD")] == 1 and delta[("data files", "GET")] == 0.5


def test_python_worker_times_come_from_the_executor_log() -> None:
    log = [
        "26/11/25 15:43:34 INFO PythonRunner: Starting Python task execution - task 0.0",
        "26/11/25 15:43:42 INFO PythonRunner: Times: total = 7825, boot = 6204, init = 1249, "
        "finish = 372 - Batches: 3, Data: 0.13 KB - task 0.0 in stage 0 (TID 0)",
        "26/11/25 15:43:50 INFO PythonRunner: Times: total = 40, boot = 2, init = 11, finish = 1",
    ]
    assert figures.python_worker_times(log) == (2, 6206, 1260)
