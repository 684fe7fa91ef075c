"""The YSB input as lakefeed streaming sources, configured by environment variables.

Shared by the throughput pipeline (``bench/ysb/pipeline.py``) and the latency pipeline
(``bench/latency/pipeline.py``); kept free of table declarations so importing it registers
nothing:

- ``YSB_CAMPAIGNS``: the ad → campaign JSON file;
- ``YSB_INPUT`` + ``YSB_MAX_FILES``: the landing folder and files per micro-batch, and
  optionally ``YSB_READER`` to force ``lakefeed.reader`` (``spark``, ``python`` or ``arrow``);
  unset, the stream gets lakefeed's defaults as a user does (Spark's JSON reader, ``_metadata``
  kept), or
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
    options = {"cloudFiles.maxFilesPerTrigger": os.environ.get("YSB_MAX_FILES", "8")}
    if os.environ.get("YSB_READER"):
        options["lakefeed.reader"] = os.environ["YSB_READER"]
    files = lf.read_files(
        os.environ["YSB_INPUT"], format="json", schema=query.EVENT_SCHEMA, **options
    )
    return files.select(*query.EVENT_FIELDS)


def campaigns() -> DataFrame:
    return query.campaigns_frame(lf.active_spark(), os.environ["YSB_CAMPAIGNS"])
