"""The options of ``format("delta")`` that the engine itself reads: where the table is, which
version a read travels to, how a write is partitioned, its idempotent transaction and the
streaming query it belongs to.

The connector's data source and the engine's Spark writer and change feed parse them alike, so
they live here, below both; Spark-free.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

from lakefeed.core import storage
from lakefeed.core.options import Options
from lakefeed.delta import log
from lakefeed.delta.errors import VERSION_NOT_FOUND, DeltaOptionError
from lakefeed.spark import offset_log

PARTITION_OPTION = "partitionBy"


CHECKPOINT_NEEDED = (
    "a streaming write to Delta needs a checkpoint: set "
    '.option("checkpointLocation", "<folder>") on the writeStream (the session-wide '
    "spark.sql.streaming.checkpointLocation is not visible to Python sinks)"
)


def delta_options(options: Mapping[str, str]) -> Options:
    """``options`` read case-insensitively, their errors as :class:`DeltaOptionError`."""
    return Options(options, DeltaOptionError)


def table_root(options: Mapping[str, str]) -> str:
    path = delta_options(options).get("path")
    if not path:
        raise DeltaOptionError(
            "a Delta table path is needed: use .load(path), .save(path) or .start(path)"
        )
    if storage.is_object_store(path):
        return path.rstrip("/")
    if "://" in path:
        parsed = urlparse(path)
        if parsed.scheme != "file":
            raise DeltaOptionError(
                f"lakefeed's Delta connector takes local paths and s3:// or s3a:// URIs: {path}"
            )
        path = unquote(parsed.path)
    elif path.startswith("file:"):
        path = path[len("file:") :]
    return os.path.abspath(path)


def register_settings(options: Mapping[str, str]) -> str:
    """The table's root, with the Hadoop settings among ``options`` (``fs.s3a.access.key``...,
    as delta-spark takes them) registered for it in this process (see
    :mod:`lakefeed.core.storage`)."""
    root = table_root(options)
    storage.register(root, storage.hadoop_options(options))
    return root


def partition_columns(options: Mapping[str, str]) -> list[str]:
    """``partitionBy`` as ``a,b`` or a JSON list (what Spark's writer sets)."""
    opts = delta_options(options)
    text = (opts.get(PARTITION_OPTION) or "").strip()
    if text.startswith("["):
        return [str(c) for c in json.loads(text)]
    return opts.names_list(PARTITION_OPTION)


def time_travel_version(root: str, options: Mapping[str, str]) -> int | None:
    opts = delta_options(options)
    stamp = opts.get("timestampAsOf")
    if "versionAsOf" in opts and stamp is not None:
        raise DeltaOptionError("set only one of versionAsOf and timestampAsOf")
    version = opts.non_negative_int("versionAsOf")
    if version is not None:
        latest = log.latest_version(root)
        if latest is not None and version > latest:
            raise DeltaOptionError(
                f"Cannot time travel Delta table to version {version}. Available versions: "
                f"[0, {latest}].",
                fix=f"read a version up to {latest}; DESCRIBE HISTORY lists them",
                code=VERSION_NOT_FOUND,
            )
        return version
    if stamp is not None:
        when = log.parse_timestamp(stamp)
        table = log.open_table(root)
        history = sorted(table.history(), key=lambda e: e["version"])
        cutoff = when.timestamp() * 1000
        chosen = [int(e["version"]) for e in history if log.commit_time(e) <= cutoff]
        if not chosen:
            raise DeltaOptionError(
                f"timestampAsOf {stamp} is before the first commit of {root} "
                f"({log.commit_time(history[0]) if history else '?'} ms since epoch)"
            )
        return chosen[-1]
    return None


def txn_option(options: Mapping[str, str]) -> tuple[str, int] | None:
    """The idempotent batch write's (txnAppId, txnVersion), as in delta-spark."""
    opts = delta_options(options)
    app, version = opts.get("txnAppId"), opts.non_negative_int("txnVersion")
    if (app is None) != (version is None):
        raise DeltaOptionError(
            "set both txnAppId and txnVersion for an idempotent write, or neither"
        )
    return (app, version) if app is not None and version is not None else None


def query_id(options: Mapping[str, str]) -> str:
    """The streaming query's stable id, from ``<checkpointLocation>/metadata``."""
    location = delta_options(options).get("checkpointLocation")
    if not location:
        raise DeltaOptionError(CHECKPOINT_NEEDED)
    return offset_log.running_query_id(location)
