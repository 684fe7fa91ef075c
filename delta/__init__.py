"""delta-spark's Python package, served by lakefeed on Spark 4.3.

delta-spark has no release for Spark 4.3 (its newest requires pyspark <= 4.2), so lakefeed ships
the ``delta`` package delta-spark's documentation imports — ``from delta import *``,
``from delta.tables import DeltaTable``, ``configure_spark_with_delta_pip``,
``delta.exceptions`` — as a thin layer over lakefeed's own Delta
(:mod:`lakefeed.compat.delta_spark`), so code written for delta-spark runs as written.
``__version__`` is lakefeed's.
"""

from delta.pip_utils import configure_spark_with_delta_pip
from delta.tables import DeltaTable
from lakefeed import __version__

__all__ = ["DeltaTable", "__version__", "configure_spark_with_delta_pip"]
