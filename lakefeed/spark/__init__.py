"""Spark itself: the session, a cluster or Spark Connect, the JVM bridge, checkpoint files.

Above :mod:`lakefeed.core`; knows nothing of Delta, connectors or pipelines. The session made
here is plain Spark (:func:`~lakefeed.spark.session.spark_session` adds connectors and the
compatibility surfaces only through the hooks its callers pass).
"""
