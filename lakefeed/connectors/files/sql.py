"""Databricks' SQL table-valued functions over landing files, as this connector's reads:
``read_files('/path', format => 'json', schemaHints => '...', header => true)`` and the older
``cloud_files('/path', 'json', map('cloudFiles.inferColumnTypes', 'true'))``.

A SQL pipeline flow's files read becomes :func:`lakefeed.read_files` with the same path,
format and options, so SQL and Python ingestion behave alike (schema location, rescued data,
exactly-once file log).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lakefeed.connectors.files.errors import OptionError
from lakefeed.connectors.files.options import auto_loader_name


@dataclass(frozen=True)
class SqlFilesRead:
    """What a SQL files read asks for: a folder, a format, a DDL schema and the options."""

    path: str
    format: str
    schema: str | None = None
    options: dict[str, str] = field(default_factory=dict)


def sql_files_read(
    function: str, args: Sequence[str], named: Sequence[tuple[str, str]]
) -> SqlFilesRead:
    """``function`` (``READ_FILES`` or ``CLOUD_FILES``) with its literal arguments."""
    options = dict(named)
    if function.upper() == "CLOUD_FILES":
        if len(args) != 2:
            raise OptionError(
                f"cloud_files takes a path and a format, then options: got {list(args)}",
                fix="write cloud_files('/landing', 'json'[, map('option', 'value', ...)])",
            )
        path, fmt = args
    else:
        if len(args) != 1 or "format" not in options:
            raise OptionError(
                "read_files takes the path, then named options with its format: got "
                f"{list(args)} and {sorted(options)}",
                fix="write read_files('/landing', format => 'json'[, option => value, ...])",
            )
        path, fmt = args[0], options.pop("format")
    schema = options.pop("schema", None)
    return SqlFilesRead(path, fmt, schema, {auto_loader_name(k): v for k, v in options.items()})
