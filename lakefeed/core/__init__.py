"""The bottom layer: errors, options, storage, the lakehouse layout, logs and redaction.

Nothing here imports pyspark or any other lakefeed package; everything above builds on it.
"""
