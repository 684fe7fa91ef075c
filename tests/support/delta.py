"""Checks on Delta tables that several test folders make."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from lakefeed.core.lakehouse import Lakehouse


def table(lakehouse: Lakehouse, name: str) -> pa.Table:
    """A lakehouse table as delta-rs reads it (not Spark): what a downstream reader sees."""
    return DeltaTable(str(lakehouse.table_path(name))).to_pyarrow_table()


def rows(root: Path | str, key: Callable[[dict], Any] = str) -> list[dict]:
    """A Delta table's rows as dicts, in ``key`` order, so tests compare them as lists."""
    return sorted(DeltaTable(str(root)).to_pyarrow_table().to_pylist(), key=key)


def unreferenced_files(root: Path) -> set[str]:
    """Data files in the table's folder that its current version does not reference: what a
    reader of the folder (not the log) would wrongly see. Empty for a clean table."""
    on_disk = {
        os.path.relpath(os.path.join(folder, name), root)
        for folder, _, names in os.walk(root)
        if "_delta_log" not in folder
        for name in names
    }
    referenced = {os.path.relpath(uri, root) for uri in DeltaTable(str(root)).file_uris()}
    return on_disk - referenced


def commit_count(root: Path) -> int:
    """JSON commits in the table's log (0 before the table exists)."""
    folder = root / "_delta_log"
    return sum(1 for p in folder.iterdir() if p.name.endswith(".json")) if folder.exists() else 0


def log_actions(root: Path, kind: str) -> list[dict]:
    """Every ``kind`` action ("add", "txn", ...) of the table's JSON commits, in order."""
    found = []
    for name in sorted(os.listdir(root / "_delta_log")):
        if name.endswith(".json"):
            for line in (root / "_delta_log" / name).read_text().splitlines():
                action = json.loads(line)
                if kind in action:
                    found.append(action[kind])
    return found


def join_across_a_change(frame: Any, out: str, checkpoint: str, change: Callable[[], None]) -> None:
    """Run streaming ``frame`` into Delta table ``out`` with 1-second triggers, calling
    ``change`` right after the first micro-batch (which must also land new input, so a second
    batch comes), until every input is processed: how a stream–static join meets a static side
    changed between two of its micro-batches."""
    from lakefeed.connectors import delta

    changed = threading.Event()

    def write(batch: Any, batch_id: int) -> None:
        delta.write(batch, out, mode="append")
        if batch_id == 0:
            change()
            changed.set()

    query = (
        frame.writeStream.foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        assert changed.wait(120)
        query.processAllAvailable()
    finally:
        query.stop()
