"""``cloudFiles.cleanSource``: archive or delete source files of committed batches only.

Called from the source's ``commit(end)``, which Spark invokes after the batch is in the commit
log: a file is never moved or deleted while a replay could still need it. On S3 a delete is one
DELETE request and a move a server-side copy and a delete (S3 has no rename).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence

from lakefeed.connectors.files.filelog import FileEntry
from lakefeed.connectors.files.options import FileSourceOptions
from lakefeed.core import storage
from lakefeed.core.logs import get_logger

log = get_logger("lakefeed.connectors.files")


def archive_path(entry: FileEntry, source_root: str, destination: str) -> str:
    """Where MOVE puts a file: same relative path under the destination folder."""
    relative = entry.path[len(source_root.rstrip("/")) :].lstrip("/")
    return storage.join(destination, relative)


def clean_committed(entries: Sequence[FileEntry], opts: FileSourceOptions) -> None:
    """Delete or move ``entries``; files already gone (an earlier attempt) are fine."""
    for entry in entries:
        try:
            if opts.clean_source == "DELETE":
                storage.remove(entry.path)
            elif opts.clean_source == "MOVE":
                assert opts.move_destination is not None
                _move(entry.path, archive_path(entry, opts.matcher.base, opts.move_destination))
        except OSError as exc:
            # Cleanup is housekeeping: the data is committed, so never fail the stream for it.
            log.warning(
                "cloudFiles could not clean a source file",
                extra={"file": entry.path, "error": str(exc)},
            )


def _move(source: str, target: str) -> None:
    if storage.is_object_store(source):
        if storage.exists(source):
            storage.move(source, target)
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        shutil.move(source, target)
