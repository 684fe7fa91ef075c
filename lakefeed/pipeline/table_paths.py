"""Tables stored at a location of their own (DLT's ``path=``) instead of the lakehouse's
``tables/<name>``.

The table stays the pipeline's by name: the location is recorded in the lakehouse's catalog
file (:meth:`lakefeed.core.lakehouse.Lakehouse.table_locations`), so reads by name, verify,
plan, state and full refresh find it there. As in DLT, a table's data never moves: a location
that differs from where the table already is refuses the run before anything is written,
unless the table is fully refreshed (its data at the old place is deleted, then it starts over
at the new one).
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import urlparse

from lakefeed.core.errors import ConfigError, PipelineDefinitionError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.storage import as_path, is_object_store
from lakefeed.delta import table as delta_table
from lakefeed.pipeline.api import Pipeline
from lakefeed.pipeline.errors import TABLE_PATH_INVALID, TABLE_PATH_MOVED


def location(path: str | None, table: str) -> str | None:
    """``path=`` as the location recorded for ``table``: an absolute local path (``file://``
    too) or an object-store URI; None when not given."""
    if path is None:
        return None
    text = str(path)
    local = text.startswith("/") or urlparse(text).scheme == "file"
    if not (local or is_object_store(text)):
        raise PipelineDefinitionError(
            f"table {table!r}: path={text!r} is neither an absolute path nor a URI",
            fix="give an absolute folder (/data/tables/orders, file:///...) or s3://bucket/..., "
            "or leave path= out to store the table in the lakehouse",
            code=TABLE_PATH_INVALID,
        )
    return str(as_path(text))


def declared_locations(pipeline: Pipeline) -> dict[str, str]:
    """The stored datasets that declare a location, to it."""
    return {
        name: dataset.path
        for name, dataset in pipeline.datasets.items()
        if dataset.path is not None and dataset.stored
    }


def check_moves(pipeline: Pipeline, lakehouse: Lakehouse, refreshed: Collection[str]) -> None:
    """Refuse a declared location (or its removal) that would move a table holding data,
    unless the run fully refreshes that table."""
    recorded = lakehouse.table_locations()
    declared = declared_locations(pipeline)
    problems, moved = [], []
    for name, dataset in pipeline.datasets.items():
        now = recorded.get(name)
        wanted = declared.get(name)
        if not dataset.stored or now == wanted or name in refreshed:
            continue
        current = lakehouse.table_path(name)
        if delta_table.exists(current):
            moved.append(name)
            problems.append(
                f"table {name!r} ({dataset.source}) is at {current}, and the pipeline now "
                f"declares it at {wanted or lakehouse.root / 'tables' / name}"
            )
    if problems:
        raise ConfigError(
            "; ".join(problems) + ": a table's data is not moved (as in DLT)",
            fix="declare the location the table has (path=...), or start it over at the new "
            "one with --full-refresh " + " ".join(moved),
            code=TABLE_PATH_MOVED,
        )


def record(pipeline: Pipeline, lakehouse: Lakehouse) -> None:
    """Record the declared locations (after :func:`check_moves` and any full refresh)."""
    lakehouse.set_table_locations(declared_locations(pipeline))
