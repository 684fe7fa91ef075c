"""The Delta connector's errors, registered once here and imported where they are raised (the
engine's own, which the connector raises too, are :mod:`lakefeed.delta.errors`)."""

from __future__ import annotations

from lakefeed.core.errors import DeltaError, register_code
from lakefeed.delta.errors import DeltaSourceError


class DeltaTableExistsError(DeltaError, FileExistsError):
    """``save()`` in the default mode found a Delta table already there (Spark's behaviour)."""

    code = "DELTA_TABLE_EXISTS"


# a stream over a column-mapped table whose columns were renamed or dropped (offsets.py)
INCOMPATIBLE_SCHEMA = register_code("DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE", DeltaSourceError)
