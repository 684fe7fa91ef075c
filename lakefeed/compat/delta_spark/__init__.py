"""delta-spark's Python API for lakefeed: ``from lakefeed.compat.delta_spark import DeltaTable``.

delta-spark cannot run on Spark 4.3; this package gives Databricks/delta-spark code the same
``DeltaTable`` (``forPath``, ``merge`` builders, ``update``, ``delete``, ``history``, ``detail``,
``optimize``, ``vacuum``, ``restoreTo*``, the ``create``/``replace`` table builder,
``convertToDelta``, ``upgradeTableProtocol``, ``addFeatureSupport``) over delta-rs. The top-level
``delta`` package lakefeed also ships (``from delta.tables import DeltaTable``,
``configure_spark_with_delta_pip``, ``delta.exceptions``) re-exports it, so that code runs as
written.
"""

from __future__ import annotations

from lakefeed.compat.delta_spark.builder import (
    DeltaColumnBuilder,
    DeltaTableBuilder,
    IdentityGenerator,
)
from lakefeed.compat.delta_spark.merge import DeltaMergeBuilder, MergeMultipleMatchesError
from lakefeed.compat.delta_spark.tables import (
    DeltaOperationError,
    DeltaOptimizeBuilder,
    DeltaTable,
    DeltaTableNotFoundError,
)

__all__ = [
    "DeltaColumnBuilder",
    "DeltaMergeBuilder",
    "DeltaOperationError",
    "DeltaOptimizeBuilder",
    "DeltaTable",
    "DeltaTableBuilder",
    "DeltaTableNotFoundError",
    "IdentityGenerator",
    "MergeMultipleMatchesError",
]
