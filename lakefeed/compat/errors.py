"""The compatibility layer's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import ConfigError, PipelineDefinitionError, register_code


class PysparkVersionError(ConfigError):
    """The installed pyspark is not the one the compat wrappers were written for."""

    code = "PYSPARK_VERSION"


DLT_UNSUPPORTED = register_code("DLT_UNSUPPORTED", PipelineDefinitionError)  # dlt.py
SDP_UNSUPPORTED = register_code("SDP_UNSUPPORTED", PipelineDefinitionError)  # sdp.py
