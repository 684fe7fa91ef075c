"""The observers (UI, status)'s errors, registered once here and imported where they are raised."""

from __future__ import annotations

from lakefeed.core.errors import ConfigError, LakefeedError, register_code


class TableViewError(LakefeedError, ValueError):
    """A request the table cannot answer (unknown table or column, wrong type): say why."""

    code = "TABLE_VIEW"


WEAK_TOKEN = register_code("UI_TOKEN", ConfigError)  # server.py
