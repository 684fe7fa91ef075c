"""lakefeed's Delta engine: the transaction log, snapshots, commits with ``txn``, reads and
writes, table features, constraints, change data, post-commit hooks.

Spark-free at its core (:mod:`~lakefeed.delta.log`, :mod:`~lakefeed.delta.snapshot`,
:mod:`~lakefeed.delta.commit`); :mod:`~lakefeed.delta.spark_read` and
:mod:`~lakefeed.delta.spark_write` are its Spark adapters. Its API for the runtime, CDC and
connectors: :mod:`~lakefeed.delta.create` (the one routine creating a table),
:mod:`~lakefeed.delta.merger`, :mod:`~lakefeed.delta.operations` (update, delete, optimize,
restore, constraints; each exactly once with a ``txn``), :mod:`~lakefeed.delta.upgrade`,
:mod:`~lakefeed.delta.table` (history, vacuum, emptiness, reset) and
:mod:`~lakefeed.delta.errors`. delta-spark's Python API (``DeltaTable``) is a surface over it,
in :mod:`lakefeed.compat.delta_spark`, which nothing in the engine imports.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_SURFACE = "lakefeed.compat.delta_spark"
_SURFACE_NAMES = frozenset(
    {
        "DeltaColumnBuilder",
        "DeltaMergeBuilder",
        "DeltaOperationError",
        "DeltaOptimizeBuilder",
        "DeltaTable",
        "DeltaTableBuilder",
        "DeltaTableNotFoundError",
        "IdentityGenerator",
        "MergeMultipleMatchesError",
    }
)


def __getattr__(name: str) -> Any:
    """``from lakefeed.delta import DeltaTable`` (before 0.2): a deprecated path to the
    delta-spark surface; ``from delta.tables import DeltaTable`` is the name to use."""
    if name not in _SURFACE_NAMES:
        raise AttributeError(f"module 'lakefeed.delta' has no attribute {name!r}")
    warnings.warn(
        f"lakefeed.delta.{name} moved: use `from delta.tables import {name}`",
        DeprecationWarning,
        stacklevel=2,
    )
    # Imported by name: the engine never depends on the surface built over it.
    return getattr(importlib.import_module(_SURFACE), name)
