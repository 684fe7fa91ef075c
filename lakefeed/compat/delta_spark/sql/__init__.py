"""Delta SQL outside pipelines: ``spark.sql`` on Delta tables, as delta-spark's SQL.

:mod:`~lakefeed.compat.delta_spark.sql.parse` reads a statement's text without Spark;
:mod:`~lakefeed.compat.delta_spark.sql.run` runs it with ``DeltaTable``, the table builder and
lakefeed's Delta reads and writes; ``lakefeed.compat.patches`` routes ``SparkSession.sql`` there.
"""
