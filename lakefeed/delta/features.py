"""Writer features a table may carry that lakefeed's writes cannot honour, Spark-free.

A Delta writer must support every writer feature of a table's protocol (PROTOCOL.md "Table
Features"). delta-rs 1.6.6 refuses the commit itself on a table with one it lacks (identity
columns, row tracking, domain metadata, in-commit timestamps, clustering, column defaults,
Iceberg compatibility: checked one by one), with an error delta-rs classes as a commit
conflict, which "retry" can never fix; by then a DELETE or MERGE has written its files. So every
write asks :func:`check_writable` before anything is written and is refused with
``DELTA_FEATURE_UNSUPPORTED_BY_LAKEFEED`` naming the feature; a refusal delta-rs still raises
(a feature added while the write ran) is translated to the same code (:func:`translate_rs`).

Three writer features delta-spark and Databricks turn on for clustered and managed tables ask
little of a writer that writes its own commits (:data:`OWN_COMMIT`): keep the table's domain
metadata (a commit without ``domainMetadata`` actions keeps it), write an ``inCommitTimestamp``
(:func:`lakefeed.delta.log_writer.commit_actions` does) and statistics of the clustering columns
(lakefeed's files carry them for every top-level column). lakefeed's appends, overwrites and
stream batches (:mod:`.log_append`) and its deletion-vector DELETE, UPDATE, MERGE and
``replaceWhere`` (:mod:`.dv_write`, :mod:`.dv_merge`) commit themselves there; on local storage
OPTIMIZE and auto compaction (:mod:`.rewrite`, which also clusters a clustered table's files)
and RESTORE (:mod:`.restore`) do too: a write that may, asks with ``own_commit=True``; one that
goes to delta-rs, without. A commit is created only if its version is absent: locally by an
atomic link, on S3 by a conditional PUT (``If-None-Match``, as delta-rs's own S3 commits), so
a store without one refuses such a write before it writes
(:func:`lakefeed.core.storage.check_exclusive_creates`).

Reader-writer features (deletion vectors, column mapping, timestampNtz, V2 checkpoints, type
widening, variant) are judged by the read path's check, which every write makes first.
"""

from __future__ import annotations

import re

from deltalake import DeltaTable

from lakefeed.core import storage
from lakefeed.core.errors import DeltaError
from lakefeed.delta import log
from lakefeed.delta.errors import FEATURE_UNSUPPORTED as UNSUPPORTED

WRITTEN = {
    "appendOnly": "kept on every write path",
    "invariants": "every write path checks the rows",
    "checkConstraints": "every write path checks the rows (`DELTA_VIOLATE_CONSTRAINT_WITH_VALUES`)",
    "changeDataFeed": "every write path; DELETE, UPDATE and MERGE write `_change_data` files",
    "generatedColumns": "writes compute the columns; UPDATE and MERGE with deletion vectors "
    "recompute them in the rows they write (others are refused)",
}
"""Writer-only features every lakefeed write honours (each checked: appended to, deleted
from), with what that covers (docs/delta-compatibility.md renders it: :func:`feature_table`)."""
_OWN = (
    "appends, overwrites, stream batches and deletion-vector DELETE, UPDATE, MERGE and "
    "`replaceWhere` commit through lakefeed (on S3 by conditional PUT), and on local storage "
    "OPTIMIZE, auto compaction and RESTORE too; "
)
OWN_WRITTEN = {
    "domainMetadata": _OWN + "the table's domains are kept (RESTORE sets the clustering "
    "columns of the version restored, as delta-spark)",
    "clustering": _OWN + "new files carry statistics of the clustering columns; OPTIMIZE "
    "clusters: each file it rewrites is ordered along a Z-order curve of the clustering "
    "columns (not delta-spark's Hilbert curve across files) and its `add` carries "
    "`clusteringProvider` `liquid`; `OPTIMIZE ... ZORDER BY` is refused "
    "(`DELTA_CLUSTERING_WITH_ZORDER_BY`)",
    "inCommitTimestamp": _OWN + "each commit writes an `inCommitTimestamp` after the previous "
    "one's",
    "identityColumns": _OWN + "a write leaving an identity column out gets values after its "
    "high water mark, which the same commit moves; GENERATED ALWAYS refuses given values "
    "(`DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED`), no UPDATE sets one "
    "(`DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED`); a deletion-vector MERGE's inserts get "
    "values the same way",
    "rowTracking": _OWN + "new files get fresh row ids (`baseRowId`, `defaultRowCommitVersion`, "
    "the `delta.rowTracking` high water mark), files RESTORE adds back keep theirs; with "
    "`delta.enableRowTracking=true` the rows UPDATE and MERGE write anew keep their ids in the "
    "materialized row-id column (inserted rows get fresh ones), OPTIMIZE is refused (it would "
    "move rows without their ids), and lakefeed can turn it on (`delta.enableRowTracking`)",
}
"""Writer-only features lakefeed honours in the commits it writes itself (locally, or on an
object store with conditional PUT; the module doc says what each asks). Other writes into such
tables (Z-ordering, OPTIMIZE or RESTORE on object storage, a DELETE, UPDATE, MERGE or
``replaceWhere`` the deletion-vector paths do not take) go to delta-rs, and are refused
first."""
REFUSED = {
    "allowColumnDefaults": "lakefeed's writers do not fill column defaults",
    "icebergCompatV1": "lakefeed's writers do not keep Iceberg metadata",
    "icebergCompatV2": "lakefeed's writers do not keep Iceberg metadata",
}
"""Writer-only features refused before anything is written (so is any feature not listed
here or above), with why: the page renders them too."""
WRITABLE = frozenset(WRITTEN)
OWN_COMMIT = frozenset(OWN_WRITTEN)
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


def writer_features(table: DeltaTable) -> set[str]:
    """The table's writer features, in Delta's names (legacy versions that imply one too)."""
    protocol = table.protocol()
    features = set(protocol.writer_features or [])
    if protocol.min_writer_version in _LEGACY and protocol.writer_features is None:
        features.add(_LEGACY[protocol.min_writer_version])
    return features


def unwritable(table: DeltaTable, own_commit: bool = False, root: str = "") -> list[str]:
    """The table's writer features lakefeed cannot honour, in Delta's names: with
    ``own_commit``, for a write that commits itself into the table at ``root``, where its
    commits can be created exclusively (:func:`check_writable` asks the store)."""
    found, honoured = writer_features(table), WRITABLE | READER_WRITER
    if own_commit and found & OWN_COMMIT and storage.exclusive_create_refusal(root) is None:
        honoured = honoured | OWN_COMMIT
    return sorted(found - honoured)


def tracks_rows(table: DeltaTable) -> bool:
    """Whether the files a commit adds to ``table`` need row ids (PROTOCOL.md "Row Tracking":
    the feature is supported)."""
    return "rowTracking" in writer_features(table)


def needs_own_commit(table: DeltaTable) -> bool:
    """Whether a write into ``table`` must commit itself: delta-rs refuses a feature it has."""
    return bool(writer_features(table) & OWN_COMMIT)


def check_writable(table: DeltaTable, root: str, operation: str, own_commit: bool = False) -> None:
    """Refuse a write (``operation``) into a table with a writer feature lakefeed lacks;
    ``own_commit``: the write commits itself where the table needs it (the module doc), which
    on a store without exclusive creates is refused with that store's code."""
    if own_commit and needs_own_commit(table):
        storage.check_exclusive_creates(root, f"{operation} on the Delta table {root}")
    missing = unwritable(table, own_commit, root)
    if missing:
        raise _refusal(", ".join(missing), root, operation)


def translate_rs(error: BaseException, root: str, operation: str) -> DeltaError | None:
    """delta-rs's "Unsupported table features required" as the coded refusal; else None."""
    found = _RS_REFUSAL.search(str(error))
    return _refusal(found.group(1), root, operation) if found else None


def feature_table() -> str:
    """The Markdown table of the writer-only features (docs/delta-compatibility.md holds it;
    a test keeps them equal)."""
    rows = [f"| `{name}` | written: {what} |" for name, what in sorted(WRITTEN.items())]
    rows += [f"| `{name}` | written: {what} |" for name, what in sorted(OWN_WRITTEN.items())]
    rows += [
        f"| `{name}` | refused (`{UNSUPPORTED}`): {why} |" for name, why in sorted(REFUSED.items())
    ]
    return "\n".join(["| Writer feature | Written |", "| --- | --- |", *rows])


def _refusal(names: str, root: str, operation: str) -> DeltaError:
    own = OWN_COMMIT & {name.strip() for name in names.split(",")}
    where = (
        f" ({', '.join(sorted(own))}: lakefeed writes those itself only in appends, "
        "overwrites, stream batches, DELETE/UPDATE/MERGE/replaceWhere with deletion vectors "
        "(delta.enableDeletionVectors=true) and, on local storage, OPTIMIZE without ZORDER BY "
        "and RESTORE, which this is not)"
        if own
        else ""
    )
    return DeltaError(
        f"{operation} on the Delta table {root} is refused: the table needs the writer "
        f"feature(s) {names}, which lakefeed (over delta-rs) cannot honour here{where}; "
        "nothing was written",
        fix="write to this table with an engine that supports the feature (e.g. delta-spark), "
        "or copy its rows into a table without it",
        code=UNSUPPORTED,
    )
