"""The runtime's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import ConfigError, OptionError


class AdviceError(ConfigError):
    code = "ADVISE"


class StateMemoryError(OptionError):
    """A ``lakefeed.state.*`` setting Spark's RocksDB state store cannot take."""

    code = "STATE_MEMORY"
