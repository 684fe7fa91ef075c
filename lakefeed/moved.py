"""Module paths from before the package map of 0.2 (core → spark → delta → … → compat), kept
importable with a DeprecationWarning so code written against them still runs.

lakefeed's public names are ``lakefeed.<name>`` (:mod:`lakefeed`) and the compatibility surfaces
(``dlt``, ``delta.tables``, ``pyspark.pipelines``); module paths are internal, but notebooks and
scripts import them (``from lakefeed.errors import LakefeedError``). One finder serves every old
path of :data:`MOVED`; nothing inside lakefeed imports an old path (``./dev check``'s
import-linter contract would not see it, so a test checks it).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

MOVED: dict[str, str] = {
    "lakefeed.cluster": "lakefeed.spark.cluster",
    "lakefeed.connect": "lakefeed.spark.connect",
    "lakefeed.connectors.compat": "lakefeed.compat.patches",
    "lakefeed.connectors.delta.changes": "lakefeed.delta.changes",
    "lakefeed.connectors.delta.commit": "lakefeed.delta.commit",
    "lakefeed.connectors.delta.constraints": "lakefeed.delta.constraints",
    "lakefeed.connectors.delta.dv": "lakefeed.delta.dv",
    "lakefeed.connectors.delta.features": "lakefeed.delta.features",
    "lakefeed.connectors.delta.files": "lakefeed.delta.files",
    "lakefeed.connectors.delta.generated": "lakefeed.delta.generated",
    "lakefeed.connectors.delta.log": "lakefeed.delta.log",
    "lakefeed.connectors.delta.manifest": "lakefeed.delta.manifest",
    "lakefeed.connectors.delta.mapping": "lakefeed.delta.mapping",
    "lakefeed.connectors.delta.post_commit": "lakefeed.delta.post_commit",
    "lakefeed.connectors.delta.properties": "lakefeed.delta.properties",
    "lakefeed.connectors.delta.pruning": "lakefeed.delta.pruning",
    "lakefeed.connectors.delta.replace": "lakefeed.delta.replace",
    "lakefeed.connectors.delta.replay": "lakefeed.delta.replay",
    "lakefeed.connectors.delta.schema": "lakefeed.delta.schema",
    "lakefeed.connectors.delta.snapshot": "lakefeed.delta.snapshot",
    "lakefeed.connectors.delta.spark_read": "lakefeed.delta.spark_read",
    "lakefeed.connectors.delta.spark_write": "lakefeed.delta.spark_write",
    "lakefeed.connectors.delta.stats": "lakefeed.delta.stats",
    "lakefeed.connectors.delta.table": "lakefeed.delta.table",
    "lakefeed.connectors.options": "lakefeed.core.options",
    "lakefeed.delta.builder": "lakefeed.compat.delta_spark.builder",
    "lakefeed.delta.exprs": "lakefeed.compat.delta_spark.exprs",
    "lakefeed.delta.merge": "lakefeed.compat.delta_spark.merge",
    "lakefeed.delta.protocol": "lakefeed.compat.delta_spark.protocol",
    "lakefeed.delta.sql": "lakefeed.compat.delta_spark.sql",
    "lakefeed.delta.tables": "lakefeed.compat.delta_spark.tables",
    "lakefeed.errors": "lakefeed.core.errors",
    "lakefeed.explain": "lakefeed.core.explain",
    "lakefeed.foreach_batch": "lakefeed.spark.foreach_batch",
    "lakefeed.jvm": "lakefeed.spark.jvm",
    "lakefeed.lakehouse": "lakefeed.core.lakehouse",
    "lakefeed.logs": "lakefeed.core.logs",
    "lakefeed.observe.event_log": "lakefeed.runtime.event_log",
    "lakefeed.pipeline.context": "lakefeed.core.flow_context",
    "lakefeed.pipeline.dlt_compat": "lakefeed.compat.dlt",
    "lakefeed.pipeline.offset_log": "lakefeed.spark.offset_log",
    "lakefeed.pipeline.sdp": "lakefeed.compat.sdp",
    "lakefeed.redact": "lakefeed.core.redact",
    "lakefeed.results": "lakefeed.runtime.results",
    "lakefeed.runtime.checkpoint_files": "lakefeed.spark.checkpoint_files",
    "lakefeed.runtime.daemon": "lakefeed.spark.daemon",
    "lakefeed.runtime.plan_text": "lakefeed.spark.plan_text",
    "lakefeed.s3a": "lakefeed.spark.s3a",
    "lakefeed.scoped": "lakefeed.core.scoped",
    "lakefeed.spark_home": "lakefeed.spark.home",
    "lakefeed.storage": "lakefeed.core.storage",
}


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path (the same object, not a copy)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}; import it from there",
            DeprecationWarning,
            stacklevel=4,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at its new path is already executed."""


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of :data:`MOVED` under their old paths."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``import lakefeed`` calls it)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
