"""``configure_spark_with_delta_pip``, delta-spark's way to a session with Delta."""

from __future__ import annotations

from pyspark.sql import SparkSession


def configure_spark_with_delta_pip(
    spark_session_builder: SparkSession.Builder, extra_packages: list[str] | None = None
) -> SparkSession.Builder:
    """The builder, whose ``getOrCreate()`` now gives a session with Delta.

    delta-spark adds its jar to ``spark.jars.packages`` here. lakefeed needs no jar: the
    builder's ``getOrCreate`` becomes :func:`lakefeed.spark_session` with the builder's settings
    (master, app name, remote and every ``config``), which registers lakefeed's Delta and drops
    the delta-spark extension and catalog the docs set (there is no delta-spark to load).
    ``extra_packages`` still go to ``spark.jars.packages``, as with delta-spark.
    """
    if type(spark_session_builder) is not SparkSession.Builder:
        raise TypeError(
            "configure_spark_with_delta_pip must be called with a SparkSession builder, "
            f"not {type(spark_session_builder)}"
        )
    builder = spark_session_builder
    if extra_packages:
        builder.config("spark.jars.packages", ",".join(extra_packages))
    builder.getOrCreate = lambda: _get_or_create(builder)  # type: ignore[method-assign]
    return builder


def _get_or_create(builder: SparkSession.Builder) -> SparkSession:
    from lakefeed.session import spark_session

    settings = {key: str(value) for key, value in builder._options.items()}
    return spark_session(
        app_name=settings.pop("spark.app.name", "lakefeed"),
        master=settings.pop("spark.master", None),
        conf=settings,
        remote=settings.pop("spark.remote", None),
    )
