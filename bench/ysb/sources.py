"""The YSB input as lakefeed streaming sources, configured by environment variables.

Shared by the throughput pipeline (``bench/ysb/pipeline.py``) and the latency pipeline
(``bench/latency/pipeline.py``); kept free of table declarations so importing it registers
nothing:

- ``YSB_CAMPAIGNS``: the ad → campaign JSON file;
- ``YSB_INPUT`` + ``YSB_MAX_FILES``: the landing folder and files per micro-batch, and
  ``YSB_READER``: ``spark`` (default: Spark's JSON reader parses each batch) or ``python``
  (lakefeed's own reader, with rescued data and file metadata when asked for), or
- ``YSB_BOOTSTRAP`` + ``YSB_TOPIC`` + ``YSB_MAX_OFFSETS``: the Kafka topic.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import lakefeed as lf
from bench.ysb import query


def events() -> DataFrame:
    """Raw YSB events (all string columns) from Kafka when configured, else from files."""
    if os.environ.get("YSB_BOOTSTRAP"):
        options = {"startingOffsets": "earliest"}
        if os.environ.get("YSB_MAX_OFFSETS"):
            options["maxOffsetsPerTrigger"] = os.environ["YSB_MAX_OFFSETS"]
        raw = lf.read_kafka(
            os.environ["YSB_TOPIC"], bootstrap_servers=os.environ["YSB_BOOTSTRAP"], **options
        )
        return raw.select(*query.parse_value(F.col("value")))
    files = lf.read_files(
        os.environ["YSB_INPUT"],
        format="json",
        schema=query.EVENT_SCHEMA,
        # No lineage needed here; Spark's own _metadata costs nothing unless selected, ours
        # is a real column a Python source cannot prune (~10% of this narrow stream).
        includeMetadata=False,
        **{
            "cloudFiles.maxFilesPerTrigger": os.environ.get("YSB_MAX_FILES", "8"),
            "lakefeed.reader": os.environ.get("YSB_READER", "spark"),
        },
    )
    return files.select(*query.EVENT_FIELDS)


def campaigns() -> DataFrame:
    return query.campaigns_frame(lf.active_spark(), os.environ["YSB_CAMPAIGNS"])
