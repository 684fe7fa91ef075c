"""The latency pipeline: YSB view events from Kafka, joined to their campaign, into gold.

No window: a windowed count is visible only once its window closes (10 s plus the watermark),
which would measure the window, not lakefeed. Environment variables: see
:mod:`bench.ysb.sources`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

import lakefeed as lf
from bench.ysb import query, sources


@lf.table(comment="YSB view events with their campaign (latency benchmark gold table)")
def ysb_views() -> DataFrame:
    return query.views(sources.events(), sources.campaigns())
