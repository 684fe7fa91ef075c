"""The runtime's errors and codes, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import (
    CheckpointError,
    ConfigError,
    OptionError,
    PipelineDefinitionError,
    register_code,
)


class AdviceError(ConfigError):
    code = "ADVISE"


class StateMemoryError(OptionError):
    """A ``lakefeed.state.*`` setting Spark's RocksDB state store cannot take."""

    code = "STATE_MEMORY"


SCHEMA_MISMATCH = register_code("SCHEMA_MISMATCH", PipelineDefinitionError)  # conform.py
UNKNOWN_FLOW = register_code("STATE_UNKNOWN_FLOW", CheckpointError)  # state.py
SPARK_CONF_STATIC = register_code("SPARK_CONF_STATIC", ConfigError)  # query_start.py
