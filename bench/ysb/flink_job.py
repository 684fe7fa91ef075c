"""YSB as a PyFlink job (Table API / SQL, streaming mode), run inside ``bench/.venv-flink``.

PyFlink pins py4j, pandas and pyarrow versions that conflict with pyspark, so this file imports
nothing from lakefeed and only the stdlib-only ``protocol`` module from the benchmark.

Choices that follow measured pitfalls (see NOTES.md, YSB section): Flink's filesystem source
reads files in directory order rather than by name, so the watermark delay is long (600 s) and
all windows are emitted when the bounded input ends; the ad → campaign join is a vectorized
lookup function (a plain SQL join loses the event-time attribute, a temporal join is ~3x
slower); output goes to CSV files, never through ``collect()``.

Run: ``bench/.venv-flink/bin/python bench/ysb/flink_job.py --input DIR --campaigns FILE
--work DIR``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.ysb import protocol  # noqa: E402

EVENTS_DDL = """
CREATE TABLE events (
  user_id STRING, page_id STRING, ad_id STRING, ad_type STRING, event_type STRING,
  event_time STRING, ip_address STRING,
  ts AS TO_TIMESTAMP_LTZ(CAST(event_time AS BIGINT), 3),
  WATERMARK FOR ts AS ts - INTERVAL '600' SECOND(3)
) WITH ('connector' = 'filesystem', 'path' = '{input}', 'format' = 'json')
"""

SINK_DDL = """
CREATE TABLE {table} (campaign_id STRING, window_start BIGINT, `count` BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{output}', 'format' = 'csv')
"""

QUERY = """
INSERT INTO {table}
SELECT campaign_id, UNIX_TIMESTAMP(CAST(window_start AS STRING)) * 1000, COUNT(*)
FROM TABLE(TUMBLE(TABLE ad_views, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY campaign_id, window_start, window_end
"""


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
    from pyflink.table.expressions import col
    from pyflink.table.udf import udf

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", str(args.cores))
    conf.set("table.local-time-zone", "UTC")
    conf.set("python.fn-execution.bundle.size", "10000")

    campaign_of = _campaigns(args.campaigns)

    @udf(result_type=DataTypes.STRING(), func_type="pandas")
    def campaign(ad_id):  # type: ignore[no-untyped-def]
        return ad_id.map(campaign_of)

    env.execute_sql(EVENTS_DDL.format(input=args.input))
    env.execute_sql(SINK_DDL.format(table="counts", output=args.work / "output"))
    views = (
        env.from_path("events")
        .where(col("event_type") == "view")
        .select(campaign(col("ad_id")).alias("campaign_id"), col("ts"))
        .where(col("campaign_id").is_not_null)
    )
    env.create_temporary_view("ad_views", views)
    if args.warmup:
        env.execute_sql(SINK_DDL.format(table="warmup", output=args.work / "warmup-output"))
        env.execute_sql(QUERY.format(table="warmup")).wait()
    started = time.perf_counter()
    env.execute_sql(QUERY.format(table="counts")).wait()
    elapsed = time.perf_counter() - started
    protocol.emit(elapsed_s=elapsed, output=str(args.work / "output"), format="csv")


def _campaigns(path: Path) -> dict[str, str]:
    rows = (json.loads(line) for line in path.read_text().splitlines() if line)
    return {r["ad_id"]: r["campaign_id"] for r in rows}


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = protocol.job_arguments(__doc__.splitlines()[0])
    return p.parse_args(argv)


if __name__ == "__main__":
    main()
