"""lakefeed: streaming lakehouse pipelines on PySpark Structured Streaming and Delta Lake."""

from lakefeed.lakehouse import Lakehouse
from lakefeed.session import active_spark, spark_session

__all__ = ["Lakehouse", "active_spark", "spark_session"]
__version__ = "0.1.0"
