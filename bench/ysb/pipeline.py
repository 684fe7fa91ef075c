"""YSB as a lakefeed pipeline: one streaming table of views per campaign per 10-second window.

The source is the JSON landing folder (Auto Loader style ``read_files``) or the Kafka topic
(``read_kafka``), see :mod:`bench.ysb.sources` for the environment variables; the query is the
one the plain PySpark job runs; lakefeed writes the result as a Delta table, exactly once.

    YSB_CAMPAIGNS=... YSB_INPUT=... lakefeed run bench/ysb/pipeline.py --mode available-now
"""

from __future__ import annotations

from pyspark.sql import DataFrame

import lakefeed as lf
from bench.ysb import query, sources


@lf.table(comment="YSB: views per campaign per 10-second event-time window")
def ysb_window_counts() -> DataFrame:
    return query.window_counts(sources.events(), sources.campaigns())
