"""lakefeed: streaming lakehouse pipelines on PySpark Structured Streaming and Delta Lake.

The public names load on first use: Spark's Python workers import ``lakefeed`` to reach one
connector module, and must not pay for the pipeline API, every connector and the CLI on each
process start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lakefeed import moved

moved.install()

if TYPE_CHECKING:
    from lakefeed.connectors.files import read_files
    from lakefeed.connectors.kafka import read_kafka
    from lakefeed.core.flow_context import FlowContext, current_flow
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.entry import load_pipeline, plan, run, validate, verify
    from lakefeed.pipeline.api import (
        append_flow,
        apply_changes,
        apply_changes_from_snapshot,
        config,
        create_auto_cdc_flow,
        create_auto_cdc_from_snapshot_flow,
        create_sink,
        create_streaming_table,
        expect,
        expect_all,
        expect_all_or_drop,
        expect_all_or_fail,
        expect_or_drop,
        expect_or_fail,
        foreach_batch_sink,
        materialized_view,
        read,
        read_stream,
        source,
        table,
        view,
    )
    from lakefeed.pipeline.dedup import drop_duplicates_within_ttl
    from lakefeed.pipeline.graph import PipelineError
    from lakefeed.pipeline.kinds import DatasetKind, RunMode
    from lakefeed.pipeline.sinks import BatchContext, current_batch
    from lakefeed.runtime.results import (
        FlowStatus,
        FlowVerdict,
        RunResult,
        UpgradePlan,
        ValidationResult,
        VerifyResult,
    )
    from lakefeed.session import active_spark, spark_session

_PIPELINE_API = [
    "append_flow",
    "apply_changes",
    "apply_changes_from_snapshot",
    "config",
    "create_auto_cdc_flow",
    "create_auto_cdc_from_snapshot_flow",
    "create_sink",
    "create_streaming_table",
    "expect",
    "expect_all",
    "expect_all_or_drop",
    "expect_all_or_fail",
    "expect_or_drop",
    "expect_or_fail",
    "foreach_batch_sink",
    "materialized_view",
    "read",
    "read_stream",
    "run",
    "source",
    "table",
    "validate",
    "verify",
    "view",
]
_HOMES: dict[str, str] = {
    **dict.fromkeys(_PIPELINE_API, "lakefeed.pipeline.api"),
    **dict.fromkeys(["plan", "run", "validate", "verify"], "lakefeed.entry"),
    **dict.fromkeys(["DatasetKind", "RunMode"], "lakefeed.pipeline.kinds"),
    **dict.fromkeys(
        [
            "FlowStatus",
            "FlowVerdict",
            "RunResult",
            "UpgradePlan",
            "ValidationResult",
            "VerifyResult",
        ],
        "lakefeed.runtime.results",
    ),
    "read_files": "lakefeed.connectors.files",
    "read_kafka": "lakefeed.connectors.kafka",
    "Lakehouse": "lakefeed.core.lakehouse",
    "FlowContext": "lakefeed.core.flow_context",
    "current_flow": "lakefeed.core.flow_context",
    "drop_duplicates_within_ttl": "lakefeed.pipeline.dedup",
    "PipelineError": "lakefeed.pipeline.graph",
    "load_pipeline": "lakefeed.entry",
    "BatchContext": "lakefeed.pipeline.sinks",
    "current_batch": "lakefeed.pipeline.sinks",
    "active_spark": "lakefeed.session",
    "spark_session": "lakefeed.session",
}

__all__ = [
    "BatchContext",
    "DatasetKind",
    "FlowContext",
    "FlowStatus",
    "FlowVerdict",
    "Lakehouse",
    "PipelineError",
    "RunMode",
    "RunResult",
    "UpgradePlan",
    "ValidationResult",
    "VerifyResult",
    "active_spark",
    "append_flow",
    "apply_changes",
    "apply_changes_from_snapshot",
    "config",
    "create_auto_cdc_flow",
    "create_auto_cdc_from_snapshot_flow",
    "create_sink",
    "create_streaming_table",
    "current_batch",
    "current_flow",
    "drop_duplicates_within_ttl",
    "expect",
    "expect_all",
    "expect_all_or_drop",
    "expect_all_or_fail",
    "expect_or_drop",
    "expect_or_fail",
    "foreach_batch_sink",
    "load_pipeline",
    "materialized_view",
    "plan",
    "read",
    "read_files",
    "read_kafka",
    "read_stream",
    "run",
    "source",
    "spark_session",
    "table",
    "validate",
    "verify",
    "view",
]
__version__ = "0.2.0"  # the one version string: pyproject.toml reads it at build time


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'lakefeed' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
