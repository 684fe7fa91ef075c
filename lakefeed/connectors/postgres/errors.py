"""The PostgreSQL connector's codes, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import ConfigError, OptionError, UnavailableError, register_code

UNAVAILABLE = register_code("POSTGRES_UNAVAILABLE", UnavailableError)
BAD_TARGET = register_code("POSTGRES_TARGET", ConfigError)
DUPLICATE_KEYS = register_code("POSTGRES_DUPLICATE_KEYS", ConfigError)
BAD_OPTION = register_code("POSTGRES_OPTION", OptionError)
