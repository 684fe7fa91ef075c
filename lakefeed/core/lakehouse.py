"""Where a pipeline keeps its things: one folder holds tables, checkpoints, schemas, event log.

Every component (runtime, UI, CLI) resolves paths through :class:`Lakehouse` so the layout is
defined once. The root is a local folder or an ``s3://`` / ``s3a://`` URI (see
:mod:`lakefeed.core.storage`): paths below it are ``Path`` or ``ObjectPath`` alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

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
    ``_lakefeed_lease.json``, ``_lakefeed_catalog.json``."""

    root: AnyPath

    @classmethod
    def at(cls, root: Location) -> Lakehouse:
        return cls(as_path(root))

    def table_path(self, name: str) -> AnyPath:
        return self.root / "tables" / check_name(name)

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
        """Names of the Delta tables present (folders holding a ``_delta_log``)."""
        tables = self.root / "tables"
        if not tables.is_dir():
            return []
        return sorted(p.name for p in tables.iterdir() if (p / "_delta_log").is_dir())

    @property
    def catalog_path(self) -> AnyPath:
        """Which tables the pipeline keeps to itself (DLT's ``private``/``temporary``)."""
        return self.root / "_lakefeed_catalog.json"

    def private_tables(self) -> set[str]:
        """Tables only the pipeline's own flows read: stored, not published by name."""
        try:
            return set(json.loads(self.catalog_path.read_text())["private"])
        except FileNotFoundError:
            return set()

    def published_table_names(self) -> list[str]:
        """The tables others see by name: all but the private ones."""
        private = self.private_tables()
        return [name for name in self.table_names() if name not in private]

    def set_private_tables(self, names: Iterable[str]) -> None:
        """Record the pipeline's private tables (each run, from its declarations)."""
        wanted = sorted(set(names))
        if sorted(self.private_tables()) == wanted:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self.catalog_path.write_text(json.dumps({"private": wanted}, indent=2))
