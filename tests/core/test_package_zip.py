"""The zip a cluster's executors import lakefeed from holds the whole package.

Executors of a real cluster have no lakefeed installed: ``spark.submit.pyFiles`` ships this zip.
A zip of one sub-package imports on a standalone cluster whose workers share the driver's
interpreter (the tests' cluster) and fails on any other.
"""

from __future__ import annotations

import zipfile

from lakefeed.spark.cluster import package_zip


def test_the_zip_holds_every_layer_of_the_package():
    names = set(zipfile.ZipFile(package_zip()).namelist())
    for module in (
        "lakefeed/__init__.py",
        "lakefeed/core/errors.py",
        "lakefeed/spark/session.py",
        "lakefeed/delta/log.py",
        "lakefeed/connectors/kafka/source.py",
        "lakefeed/runtime/runner.py",
    ):
        assert module in names
