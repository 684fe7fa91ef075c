"""AUTO CDC's codes, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import PipelineDefinitionError, register_code

INVALID = register_code("CDC_INVALID", PipelineDefinitionError)
