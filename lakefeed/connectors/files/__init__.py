"""Placeholder until issue 5 lands its connector here."""

from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register this connector's data sources on ``spark``."""
