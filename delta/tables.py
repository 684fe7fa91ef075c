"""``delta.tables``: delta-spark's table API, as :mod:`lakefeed.delta` implements it."""

from lakefeed.delta import (
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
