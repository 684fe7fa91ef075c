"""Writes lakefeed commits itself into tables whose writer features delta-rs refuses, Spark-free.

delta-rs 1.6.6 refuses any commit into a table whose protocol lists ``domainMetadata``,
``clustering`` or ``inCommitTimestamp``: the tables delta-spark and Databricks make clustered
or managed. What those features ask of an append or an overwrite, lakefeed does
(:mod:`.features` says how), so the files of such a write (a batch write, a stream's
micro-batch with its ``txn``, a pipeline table's refresh) are committed here through
:func:`.log_writer.commit_actions`, which writes the in-commit timestamp and checks the commits
that won the race with Delta's rules: an append is blind (rows others added meanwhile do not
conflict with it), a ``txn`` of the same application does (a zombie's batch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from lakefeed.core.errors import DeltaError
from lakefeed.delta import dv_write, files, log_writer
from lakefeed.delta.errors import FEATURE_UNSUPPORTED


def commit(
    root: str,
    read_version: int,
    written: Sequence[files.WrittenFile],
    overwrite: bool,
    txn: tuple[str, int] | None,
    info: Mapping[str, Any],
    changes: Sequence[dict[str, Any]] = (),
    row_ids: bool = False,
) -> int:
    """Commit ``written`` (with ``txn``) on ``read_version``, replacing every live file when
    ``overwrite``; ``info``: the write's ``commitInfo`` (operation, parameters, lakefeed's own
    keys); ``changes``: a ``metaData`` action it makes; ``row_ids``: the table tracks rows
    (:func:`.log_writer.commit_actions`). The version committed."""
    now = files.now_ms()
    removes = _removes(root, read_version, now) if overwrite else []
    rows = sum(json.loads(f.stats).get("numRecords", 0) for f in written)
    metrics = {
        "numFiles": len(written),
        "numOutputRows": rows,
        "numOutputBytes": sum(f.size for f in written),
    }
    if overwrite:
        metrics["numRemovedFiles"] = len(removes)
    shown = {key: str(value) for key, value in metrics.items()}
    actions: list[dict[str, Any]] = [
        {"commitInfo": {**info, "isBlindAppend": not overwrite, "operationMetrics": shown}}
    ]
    actions += changes
    if txn is not None:
        actions.append({"txn": {"appId": txn[0], "version": txn[1], "lastUpdated": now}})
    actions += [{"remove": remove} for remove in removes]
    actions += [{"add": {**dv_write.new_add(f), "dataChange": True}} for f in written]
    touched = {remove["path"] for remove in removes}
    app_id = txn[0] if txn is not None else None
    return log_writer.commit_actions(
        root, read_version, actions, touched, app_id, blind=not overwrite, row_ids=row_ids
    )


def info(operation: str, overwrite: bool, partition_by: Sequence[str]) -> dict[str, Any]:
    """A write's ``commitInfo`` keys as delta-spark writes them (``WRITE`` with its mode, a
    stream's ``STREAMING UPDATE`` with its output mode)."""
    if operation == "STREAMING UPDATE":
        parameters = {"outputMode": "Complete" if overwrite else "Append"}
    else:
        parameters = {
            "mode": "Overwrite" if overwrite else "Append",
            "partitionBy": json.dumps(list(partition_by)),
        }
    return log_writer.commit_info(operation, parameters)["commitInfo"]


def _removes(root: str, version: int, now: int) -> list[dict[str, Any]]:
    """The ``remove`` of every live file at ``version`` (with its deletion vector)."""
    live = log_writer.live_files(root, version)
    if live is None:
        raise DeltaError(
            f"an overwrite of the Delta table {root} is refused: its log at version {version} "
            "could not be replayed here (a file of it is missing), so its files cannot be "
            "removed; nothing was written",
            fix="overwrite the table with delta-spark, or restore its log",
            code=FEATURE_UNSUPPORTED,
        )
    return [dv_write.remove_action(add, now) for add in live.values()]
