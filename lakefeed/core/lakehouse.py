"""Where a pipeline keeps its things: one folder holds tables, checkpoints, schemas, event log.

Every component (runtime, UI, CLI) resolves paths through :class:`Lakehouse` so the layout is
defined once. The root is a local folder or an ``s3://`` / ``s3a://`` URI (see
:mod:`lakefeed.core.storage`): paths below it are ``Path`` or ``ObjectPath`` alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakefeed.core.storage import AnyPath, Location, as_path

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Where a lakehouse lives when nothing says otherwise (relative to the working folder).
DEFAULT_ROOT = "lakehouse"


def check_name(name: str) -> str:
    """Table and flow names become folder names: refuse anything that could escape the root."""
    if not _NAME.match(name):
        raise ValueError(
            f"invalid name {name!r}: use letters, digits and underscores, not starting with a digit"
        )
    return name


@dataclass(frozen=True)
class Lakehouse:
    """Layout: ``tables/<name>``, ``checkpoints/<flow>``, ``schemas/<flow>``, ``event_log``,
    ``_lakefeed_lease.json``, ``_lakefeed_catalog.json`` (a table declared with a location of
    its own is stored there instead of ``tables/<name>``)."""

    root: AnyPath

    @classmethod
    def at(cls, root: Location) -> Lakehouse:
        return cls(as_path(root))

    def table_path(self, name: str) -> AnyPath:
        """Where table ``name`` is: ``tables/<name>``, or the location its pipeline gave it
        (DLT's ``path=``, recorded in the catalog file)."""
        located = self.table_locations().get(check_name(name))
        return as_path(located) if located is not None else self.root / "tables" / name

    def checkpoint_path(self, flow: str) -> AnyPath:
        return self.root / "checkpoints" / check_name(flow)

    def schema_path(self, flow: str) -> AnyPath:
        return self.root / "schemas" / check_name(flow)

    @property
    def event_log_path(self) -> AnyPath:
        return self.root / "event_log"

    @property
    def lease_path(self) -> AnyPath:
        """Held by the one run writing here (``lakefeed.runtime.lease``)."""
        return self.root / "_lakefeed_lease.json"

    def table_names(self) -> list[str]:
        """Names of the Delta tables present (folders holding a ``_delta_log``), those stored
        at a location of their own included."""
        tables = self.root / "tables"
        names = {p.name for p in tables.iterdir()} if tables.is_dir() else set()
        names |= set(self.table_locations())
        return sorted(n for n in names if (self.table_path(n) / "_delta_log").is_dir())

    @property
    def catalog_path(self) -> AnyPath:
        """What the pipeline declared about its tables beyond their data: which it keeps to
        itself (DLT's ``private``/``temporary``), which live elsewhere (DLT's ``path``)."""
        return self.root / "_lakefeed_catalog.json"

    def _catalog(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.catalog_path.read_text()))
        except FileNotFoundError:
            return {}

    def _update_catalog(self, key: str, value: Any) -> None:
        catalog = self._catalog()
        if catalog.get(key, type(value)()) == value:
            return
        catalog[key] = value
        self.root.mkdir(parents=True, exist_ok=True)
        self.catalog_path.write_text(json.dumps(catalog, indent=2, sort_keys=True))

    def private_tables(self) -> set[str]:
        """Tables only the pipeline's own flows read: stored, not published by name."""
        return set(self._catalog().get("private", []))

    def published_table_names(self) -> list[str]:
        """The tables others see by name: all but the private ones."""
        private = self.private_tables()
        return [name for name in self.table_names() if name not in private]

    def set_private_tables(self, names: Iterable[str]) -> None:
        """Record the pipeline's private tables (each run, from its declarations)."""
        self._update_catalog("private", sorted(set(names)))

    def table_locations(self) -> dict[str, str]:
        """Tables stored outside ``tables/``: name to location (a local path or a URI)."""
        return dict(self._catalog().get("locations", {}))

    def set_table_locations(self, locations: Mapping[str, str]) -> None:
        """Record where the pipeline's tables with a location of their own live (each run,
        from its declarations, once a moved table was reset)."""
        self._update_catalog("locations", dict(sorted(locations.items())))
