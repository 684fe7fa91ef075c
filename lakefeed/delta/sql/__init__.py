"""Delta SQL outside pipelines: ``spark.sql`` on Delta tables, as delta-spark's SQL.

:mod:`~lakefeed.delta.sql.parse` reads a statement's text without Spark;
:mod:`~lakefeed.delta.sql.run` runs it with ``DeltaTable``, the table builder and lakefeed's
Delta reads and writes; ``lakefeed.connectors.compat`` routes ``SparkSession.sql`` there.
"""
