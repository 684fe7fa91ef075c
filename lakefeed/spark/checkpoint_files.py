"""Is a flow's checkpoint readable at all? Checked before its query starts.

Spark reads a damaged offset or commit log file (a truncated write, a bad copy, a hand edit) only
once the query runs, and fails the same way on every restart. Checking the files' framing first
turns that into one permanent :class:`~lakefeed.core.errors.CheckpointError` naming the file and the
fix, instead of a loop of restarts each dumping a JVM stack.

A process killed while Spark writes the *first* batch's offsets leaves only a temporary file
(``offsets/.0.<uuid>.tmp``); Spark 4.3 then finds no batch yet a non-empty folder and refuses
every restart (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). Those leftovers were never part
of the checkpoint, so :func:`clear_interrupted_start` removes them.
"""

from __future__ import annotations

import json
import re

from lakefeed.core.errors import CheckpointError
from lakefeed.core.storage import AnyPath, listing
from lakefeed.spark.errors import CHECKPOINT_CORRUPT as CORRUPT

_VERSION = re.compile(r"^v\d+$")
# Spark's logs: a version line, then a JSON metadata line (offsets: one line per source follows)
_LOGS = ("offsets", "commits")
_JSON_FILES = ("metadata", "_lakefeed.json")


def clear_interrupted_start(checkpoint: AnyPath) -> list[AnyPath]:
    """Remove the temporary files of a first batch whose offsets never landed; return them.

    Only when ``offsets`` holds no batch at all: then nothing in ``offsets`` or ``commits`` can
    be read by Spark, and a temporary file there is what a killed write left behind. Anything
    else (a real batch file, state) is left for Spark and the guard to judge.
    """
    offsets = checkpoint / "offsets"
    if not offsets.is_dir() or any(p.name.isdigit() for p in offsets.iterdir()):
        return []
    removed = []
    for log in _LOGS:
        folder = checkpoint / log
        for path in listing(folder, ".*.tmp"):
            path.unlink()
            removed.append(path)
    return removed


def check_checkpoint_files(checkpoint: AnyPath, flow: str, refresh: str) -> None:
    """Raise a permanent ``CHECKPOINT_CORRUPT`` error for the first unreadable file."""
    for name in _JSON_FILES:
        path = checkpoint / name
        if path.is_file() and _bad_json(path.read_bytes()):
            _corrupt(path, flow, refresh)
    for log in _LOGS:
        for path in listing(checkpoint / log):
            if path.name.isdigit() and _bad_log_file(path.read_bytes()):
                _corrupt(path, flow, refresh)


def _bad_json(data: bytes) -> bool:
    try:
        json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError both are
        return True
    return False


def _bad_log_file(data: bytes) -> bool:
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return True
    return len(lines) < 2 or not _VERSION.match(lines[0]) or _bad_json(lines[1].encode())


def _corrupt(path: AnyPath, flow: str, refresh: str) -> None:
    raise CheckpointError(
        f"flow {flow!r}: checkpoint file {path} is damaged (not what Spark wrote); the query "
        "cannot resume from it",
        fix=f"restore the file from a backup, or rebuild the table with `{refresh}`",
        code=CORRUPT,
    )
