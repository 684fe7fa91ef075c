"""What ``spark.sql`` costs once lakefeed serves Delta SQL (``lakefeed.compat.delta_spark.sql``).

Statements that touch no Delta table must reach Spark's ``sql`` at ~zero cost: each leg runs
the same statement through pyspark's own method (the baseline, taken from
``lakefeed.compat.patches``'s table of originals) and through lakefeed's wrapper, alternating,
and prints the wrapper's median time over the baseline's (one session, same run):

  set:     ``SET spark.sql.shuffle.partitions = 2`` (no table: the text pre-check alone)
  query:   a three-table SELECT over temp views (tokenized; each FROM/JOIN name is looked up
           as a Delta folder on disk, none is one)
  delta:   ``SELECT count(*) FROM delta.`p``` vs ``spark.read.format("delta").load(p)`` as a
           temp view plus the same ``sql`` (what users wrote before): the rewrite's cost

Also prints the parser alone (µs per statement, no Spark) and the wrapper alone (Spark's
``sql`` replaced by a no-op: the parse, the conf look-ups and folder checks per name), which
profiles the added cost without Spark's noise.

    PYTHONPATH=$PWD PYSPARK_PYTHON=$PWD/.venv/bin/python .venv/bin/python -m bench.delta_sql_bench \
        --repeats 200
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from lakefeed.compat import patches as compat
from lakefeed.compat.delta_spark.sql.parse import parse
from lakefeed.compat.delta_spark.sql.run import sql as delta_sql
from lakefeed.session import spark_session

SET = "SET spark.sql.shuffle.partitions = 2"
QUERY = (
    "SELECT a.id, b.v, count(*) AS n FROM bench_a a JOIN bench_b b ON a.id = b.id "
    "LEFT JOIN bench_c c ON c.id = a.id WHERE a.id > 3 GROUP BY a.id, b.v ORDER BY n"
)


def _median_ms(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=100)
    options = parser.parse_args()
    spark = spark_session(app_name="delta-sql-bench", master="local[2]")
    original = dict(compat._ORIGINALS)[(type(spark), "sql")]
    for name in ("bench_a", "bench_b", "bench_c"):
        spark.range(10).selectExpr("id", "id AS v").createOrReplaceTempView(name)
    path = tempfile.mkdtemp() + "/t"
    spark.range(1000).write.format("delta").save(path)

    def before_delta() -> None:
        spark.read.format("delta").load(path).createOrReplaceTempView("bench_t")
        original(spark, "SELECT count(*) FROM bench_t")

    legs = {
        "set": (
            lambda: original(spark, SET),
            lambda: spark.sql(SET),
        ),
        "query": (lambda: original(spark, QUERY), lambda: spark.sql(QUERY)),
        "delta": (before_delta, lambda: spark.sql(f"SELECT count(*) FROM delta.`{path}`")),
    }
    for name, (baseline, wrapped) in legs.items():
        for _ in range(3):  # warm up both
            baseline(), wrapped()
        base = [_median_ms(baseline, options.repeats // 5) for _ in range(5)]
        ours = [_median_ms(wrapped, options.repeats // 5) for _ in range(5)]
        ratio = statistics.median(ours) / statistics.median(base)
        print(
            f"{name:6s} spark.sql {statistics.median(base):7.3f} ms  "
            f"wrapped {statistics.median(ours):7.3f} ms  ratio {ratio:5.2f}x"
        )
    start = time.perf_counter()
    for _ in range(options.repeats * 10):
        parse(QUERY)
    per = (time.perf_counter() - start) / (options.repeats * 10) * 1e6
    print(f"parse alone: {per:.1f} µs per statement ({len(QUERY)} chars)")
    # The wrapper's own work, Spark's sql replaced by a no-op: parse plus, per FROM/JOIN name,
    # the conf look-ups and the folder check (py4j calls included).
    for name, text in (("set", SET), ("query", QUERY)):
        start = time.perf_counter()
        for _ in range(options.repeats):
            delta_sql(spark, _noop, text, None, {})
        per = (time.perf_counter() - start) / options.repeats * 1e6
        print(f"wrapper alone, {name}: {per:.1f} µs per statement")
    spark.stop()


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


if __name__ == "__main__":
    main()
