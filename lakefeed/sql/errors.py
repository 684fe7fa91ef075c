"""The SQL readers's errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import LakefeedError


class SqlTextError(LakefeedError, ValueError):
    """SQL text whose table references lakefeed cannot read."""

    code = "SQL_TEXT"
