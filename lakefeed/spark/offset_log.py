"""Spark's offset and commit logs of a checkpoint, read without Spark.

``<checkpoint>/offsets/N`` is written when batch N is planned: a version line, the batch's
metadata (``batchWatermarkMs``, ...) and then one line per source with its end offset (JSON, or
``-`` for none), in the order of the query's sources. ``<checkpoint>/commits/N`` appears once
batch N is committed. What a stream has committed is therefore the offsets of the newest batch in
the commit log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from lakefeed.core.errors import CheckpointError
from lakefeed.core.storage import AnyPath, Location, as_path, is_object_store


@dataclass(frozen=True)
class Batch:
    """One batch of Spark's offset log."""

    batch_id: int
    watermark_ms: int
    offsets: tuple[Any, ...]
    """Each source's end offset (decoded JSON; None for "-"), in Spark's source order."""


def query_id(checkpoint: Location) -> str | None:
    """The query id in ``<checkpoint>/metadata`` (written when the query first starts, kept
    across restarts): the app id sinks record with each batch so a replay is a no-op."""
    path = as_path(_local(str(checkpoint))) / "metadata"
    if not path.is_file():
        return None
    return str(json.loads(path.read_text().splitlines()[0])["id"])


def _local(location: str) -> str:
    """A ``file:`` URI as a path (Spark hands checkpoint locations over either way)."""
    if not is_object_store(location) and ("://" in location or location.startswith("file:")):
        return unquote(urlparse(location).path)
    return location


def running_query_id(checkpoint: Location) -> str:
    """:func:`query_id` of a query that has started (a sink inside a batch asks this)."""
    found = query_id(checkpoint)
    if found is None:
        raise CheckpointError(
            f"{checkpoint} has no metadata file: is it the checkpointLocation of this query?",
            fix="pass the query's own checkpointLocation",
        )
    return found


def batch_ids(folder: AnyPath) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def read_batch(checkpoint: AnyPath, batch_id: int) -> Batch | None:
    """Batch ``batch_id`` of the offset log, None when the log no longer holds it."""
    path = checkpoint / "offsets" / str(batch_id)
    if not path.is_file():
        return None
    lines = path.read_text().splitlines()
    if len(lines) < 2:
        raise CheckpointError(
            f"{path} is not a Spark offset log entry",
            fix="restore the checkpoint, or rebuild the table with --full-refresh",
        )
    metadata = json.loads(lines[1])
    offsets = tuple(None if line == "-" else json.loads(line) for line in lines[2:])
    return Batch(batch_id, int(metadata.get("batchWatermarkMs", 0)), offsets)


def fingerprint(checkpoint: Location, batch_id: int) -> str | None:
    """A hash of batch ``batch_id``'s source offsets (its ``offsets/N`` lines after the
    metadata, which holds the planning time): equal for a batch Spark replays, different for
    a batch planned again over a grown source. None when the log holds no such batch."""
    path = as_path(_local(str(checkpoint))) / "offsets" / str(batch_id)
    if not path.is_file():
        return None
    sources = "\n".join(line.strip() for line in path.read_text().splitlines()[2:])
    return hashlib.sha256(sources.encode()).hexdigest()[:32]


def replay_conflict(
    batch_id: int, offsets: str | None, held: int | None, recorded: Callable[[], str | None]
) -> str | None:
    """Why a sink must not skip batch ``batch_id`` as already written, or None when it may.

    ``offsets`` is the batch's :func:`fingerprint` (None: the writer knows no checkpoint),
    ``held`` the newest batch of the query the sink holds, ``recorded()`` the offsets hash
    stored with that batch (None: none stored, by an older lakefeed). Spark replays only the
    batch after its last committed one, from the same ``offsets/N``; any other batch id the
    sink holds comes from a checkpoint behind it (restored from a backup, or its last
    ``offsets/N`` + ``commits/N`` deleted), and skipping it would drop its rows. The answer
    completes "the sink ...": the Delta table, the Kafka control topic and the PostgreSQL
    commit table judge the same way.
    """
    if offsets is None or held is None or held < batch_id:
        return None
    if held > batch_id:
        return f"holds batches up to {held} of this query"
    stored = recorded()
    if stored is None or stored == offsets:
        return None  # a replay of the very batch the sink holds
    return f"holds batch {batch_id} of this query over other source offsets"


def last_committed(checkpoint: AnyPath) -> Batch | None:
    """The newest batch in the commit log (None: nothing committed yet)."""
    done = batch_ids(checkpoint / "commits")
    return read_batch(checkpoint, done[-1]) if done else None


def source_count(checkpoint: AnyPath) -> int | None:
    """How many sources the newest planned batch recorded (None: no batch planned yet)."""
    planned = batch_ids(checkpoint / "offsets")
    batch = read_batch(checkpoint, planned[-1]) if planned else None
    return None if batch is None else len(batch.offsets)
