"""lakefeed: streaming lakehouse pipelines on PySpark Structured Streaming and Delta Lake."""

from lakefeed.connectors.files import read_files as read_files
from lakefeed.connectors.kafka import read_kafka as read_kafka
from lakefeed.lakehouse import Lakehouse
from lakefeed.pipeline.api import (
    config,
    expect,
    expect_all,
    expect_all_or_drop,
    expect_all_or_fail,
    expect_or_drop,
    expect_or_fail,
    materialized_view,
    read,
    read_stream,
    source,
    table,
    view,
)
from lakefeed.pipeline.context import FlowContext, current_flow
from lakefeed.pipeline.graph import PipelineError
from lakefeed.pipeline.loader import load_pipeline
from lakefeed.session import active_spark, spark_session

__all__ = [
    "FlowContext",
    "Lakehouse",
    "PipelineError",
    "active_spark",
    "config",
    "current_flow",
    "expect",
    "expect_all",
    "expect_all_or_drop",
    "expect_all_or_fail",
    "expect_or_drop",
    "expect_or_fail",
    "load_pipeline",
    "materialized_view",
    "read",
    "read_stream",
    "source",
    "spark_session",
    "table",
    "view",
]
__version__ = "0.1.0"
