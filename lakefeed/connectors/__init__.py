"""Sources and sinks lakefeed ships on Spark's Python Data Source API (no jars needed)."""
