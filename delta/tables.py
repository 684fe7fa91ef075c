"""``delta.tables``: delta-spark's table API, as :mod:`lakefeed.compat.delta_spark` implements
it."""

from lakefeed.compat.delta_spark import (
    DeltaColumnBuilder,
    DeltaMergeBuilder,
    DeltaOptimizeBuilder,
    DeltaTable,
    DeltaTableBuilder,
    IdentityGenerator,
)

__all__ = [
    "DeltaColumnBuilder",
    "DeltaMergeBuilder",
    "DeltaOptimizeBuilder",
    "DeltaTable",
    "DeltaTableBuilder",
    "IdentityGenerator",
]
