"""``lakefeed.spark_session()`` and ``lakefeed.active_spark()``: a session ready for lakefeed.

Composed here, above the layers it joins: the plain, well-configured session of
:mod:`lakefeed.spark.session`, lakefeed's connectors (:func:`lakefeed.connectors.registry.
session_extension`: ``delta``, ``cloudFiles``, ``lakefeed_kafka``, ``lakefeed_iot``... registered
on every session handed out) and, with ``compat=True`` (the default), the compatibility surfaces
of :mod:`lakefeed.compat.patches`, so that Databricks-style ``format("delta")`` /
``format("cloudFiles")`` code runs unchanged. lakefeed's own runtime does not need them: it
calls the connectors' functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import SparkSession

from lakefeed.compat import patches
from lakefeed.connectors import registry
from lakefeed.spark import session
from lakefeed.spark.session import SessionExtension


def extensions(compat: bool = True) -> tuple[SessionExtension, ...]:
    """What lakefeed adds to a session: its connectors, and the surfaces when ``compat``."""
    return (patches.session_extension() if compat else registry.session_extension(),)


def spark_session(
    app_name: str = "lakefeed",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    compat: bool = True,
    storage: Iterable[object] = (),
    remote: str | None = None,
) -> SparkSession:
    """Build (or reuse) a SparkSession with lakefeed's connectors registered.

    Safe to call repeatedly: Spark returns the running session and registration is idempotent.
    ``compat`` installs the ``format("delta")``... compatibility layer (see module docstring);
    ``storage`` lists locations the session will use (S3 ones add S3A); ``remote`` (or
    ``SPARK_REMOTE``) is a Spark Connect server ``sc://HOST:PORT`` to run on instead of a driver
    in this process (see :func:`lakefeed.spark.session.spark_session`).
    """
    return session.spark_session(
        app_name, master, conf, storage=storage, remote=remote, extensions=extensions(compat)
    )


def active_spark() -> SparkSession:
    """The session a pipeline function should use: the runner's while it evaluates flows, else
    the running one, else a fresh :func:`spark_session` (see
    :func:`lakefeed.spark.session.active_spark`)."""
    return session.active_spark(*extensions())
