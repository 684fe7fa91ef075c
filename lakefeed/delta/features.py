"""Writer features a table may carry that lakefeed's writes cannot honour, Spark-free.

A Delta writer must support every writer feature of a table's protocol (PROTOCOL.md "Table
Features"). delta-rs 1.6.6 refuses the commit itself on a table with one it lacks (identity
columns, row tracking, domain metadata, in-commit timestamps, clustering, column defaults,
Iceberg compatibility: checked one by one), with an error delta-rs classes as a commit
conflict, which "retry" can never fix; by then a DELETE or MERGE has written its files. So every
write asks :func:`check_writable` before anything is written and is refused with
``DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED`` naming the feature; a refusal delta-rs still raises
(a feature added while the write ran) is translated to the same code (:func:`translate_rs`).

Reader-writer features (deletion vectors, column mapping, timestampNtz, V2 checkpoints, type
widening, variant) are judged by the read path's check, which every write makes first.
"""

from __future__ import annotations

import re

from deltalake import DeltaTable

from lakefeed.core.errors import DeltaError
from lakefeed.delta import log
from lakefeed.delta.errors import FEATURE_UNSUPPORTED as UNSUPPORTED

WRITABLE = {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}
"""Writer-only features lakefeed's writes honour (each checked: appended to, deleted from)."""
READER_WRITER = {
    "deletionVectors",
    "columnMapping",
    "timestampNtz",
    "v2Checkpoint",
    "typeWidening",
    "typeWidening-preview",
    "variantType",
    "variantType-preview",
    "vacuumProtocolCheck",
}
"""Features in ``readerFeatures`` too: the read path's check decides about them."""
WRITES_KEEP = log.PLAIN_PARQUET | {"deletionVectors", "columnMapping"}
"""Reader features lakefeed's writes keep right. Under column mapping lakefeed's writers write
physical names and field ids, and delta-rs's DELETE, UPDATE and MERGE do too (delta-rs refuses
OPTIMIZE there). Under deletion vectors an append adds new
files, and delta-rs's overwrite, replaceWhere, DELETE, UPDATE, MERGE, OPTIMIZE and RESTORE scan
through delta-rs's kernel reader, which drops the rows a file's deletion vector deletes (a
rewritten file never resurrects one); their ``remove`` of such a file carries its
``deletionVector`` (each checked with deltalake 1.6.6 on tables made as delta-spark writes
them). delta-rs rewrites files (copy-on-write); DELETE and UPDATE write deletion vectors
where the table enables them (:mod:`lakefeed.delta.dv_write`)."""
_LEGACY = {6: "identityColumns"}
"""Legacy writer versions that imply a feature lakefeed cannot write (PROTOCOL.md)."""
_RS_REFUSAL = re.compile(r"Unsupported table features required: \[([^\]]*)\]")


def unwritable(table: DeltaTable) -> list[str]:
    """The table's writer features lakefeed cannot honour, in Delta's names."""
    protocol = table.protocol()
    features = set(protocol.writer_features or [])
    if protocol.min_writer_version in _LEGACY and protocol.writer_features is None:
        features.add(_LEGACY[protocol.min_writer_version])
    return sorted(features - WRITABLE - READER_WRITER)


def check_writable(table: DeltaTable, root: str, operation: str) -> None:
    """Refuse a write (``operation``) into a table with a writer feature lakefeed lacks."""
    missing = unwritable(table)
    if missing:
        raise _refusal(", ".join(missing), root, operation)


def translate_rs(error: BaseException, root: str, operation: str) -> DeltaError | None:
    """delta-rs's "Unsupported table features required" as the coded refusal; else None."""
    found = _RS_REFUSAL.search(str(error))
    return _refusal(found.group(1), root, operation) if found else None


def _refusal(names: str, root: str, operation: str) -> DeltaError:
    return DeltaError(
        f"{operation} on the Delta table {root} is refused: the table needs the writer "
        f"feature(s) {names}, which lakefeed (over delta-rs) cannot honour; nothing was written",
        fix="write to this table with an engine that supports the feature (e.g. delta-spark), "
        "or copy its rows into a table without it",
        code=UNSUPPORTED,
    )
