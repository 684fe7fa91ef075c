"""The compatibility surfaces, at the edge: code written for other systems runs unchanged.

- :mod:`~lakefeed.compat.patches`: the one table of pyspark patches (``format("delta")``,
  ``format("cloudFiles")``, Delta SQL through ``spark.sql``, ...), each removable;
- :mod:`~lakefeed.compat.delta_spark`: delta-spark's Python API (``DeltaTable``, the table
  builder, Delta SQL), served to ``from delta.tables import DeltaTable``;
- :mod:`~lakefeed.compat.dlt`: Databricks DLT's ``import dlt``;
- :mod:`~lakefeed.compat.sdp`: Spark Declarative Pipelines' ``from pyspark import pipelines``.

Nothing below this package imports it: the engine (:mod:`lakefeed.delta`, the connectors, the
pipeline model and the runtime) runs on a session without any of these surfaces.
"""
