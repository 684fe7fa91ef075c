"""``cloudFiles.cleanSource``: archive or delete source files of committed batches only.

Called from the source's ``commit(end)``, which Spark invokes after the batch is in the commit
log: a file is never moved or deleted while a replay could still need it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from lakefeed.connectors.files.filelog import FileEntry
from lakefeed.connectors.files.options import FileSourceOptions
from lakefeed.logs import get_logger

log = get_logger("lakefeed.connectors.files")


def archive_path(entry: FileEntry, source_root: str, destination: str) -> Path:
    """Where MOVE puts a file: same relative path under the destination folder."""
    relative = os.path.relpath(entry.path, source_root)
    return Path(destination) / relative


def clean_committed(entries: Sequence[FileEntry], opts: FileSourceOptions) -> None:
    """Delete or move ``entries``; files already gone (an earlier attempt) are fine."""
    for entry in entries:
        try:
            if opts.clean_source == "DELETE":
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
            elif opts.clean_source == "MOVE":
                assert opts.move_destination is not None
                target = archive_path(entry, opts.matcher.base, opts.move_destination)
                target.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileNotFoundError):
                    shutil.move(entry.path, target)
        except OSError as exc:
            # Cleanup is housekeeping: the data is committed, so never fail the stream for it.
            log.warning(
                "cloudFiles could not clean a source file",
                extra={"file": entry.path, "error": str(exc)},
            )
