"""AUTO CDC's codes, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import PipelineDefinitionError, register_code

INVALID = register_code("CDC_INVALID", PipelineDefinitionError)
FLOWS_MIXED = register_code(
    "CDC_FLOWS_MIXED",
    PipelineDefinitionError,
    "A streaming table has AUTO CDC flows mixed with append flows, with a snapshot flow, or "
    "with AUTO CDC flows of other keys or SCD type.",
)
