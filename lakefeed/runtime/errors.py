"""The runtime's errors and codes, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import (
    CheckpointError,
    ConfigError,
    LakefeedError,
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


class VerifyCatchUpError(LakefeedError, RuntimeError):
    """``verify``'s catch-up run did not bring every flow up to date (a flow failed): what it
    would compare, a sink above all (which it cannot recompute), is behind its input."""

    code = "VERIFY_CATCH_UP_FAILED"
    permanent = False
