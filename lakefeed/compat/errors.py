"""The compatibility layer's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import ConfigError


class PysparkVersionError(ConfigError):
    """The installed pyspark is not the one the compat wrappers were written for."""

    code = "PYSPARK_VERSION"
