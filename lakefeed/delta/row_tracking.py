"""Row tracking's materialized columns: the ids rows keep when a change writes them anew,
Spark-free.

A table with ``delta.enableRowTracking=true`` promises each row a stable id (PROTOCOL.md "Row
Tracking"): a row's id is the value of the materialized row-id column of its data file when
that is not null, else the file's ``baseRowId`` plus the row's position in the file; its
commit version likewise comes from the materialized row-commit-version column, else the file's
``defaultRowCommitVersion``. The columns are named by the table's configuration
(:data:`ROW_ID_NAME`, :data:`COMMIT_VERSION_NAME`; delta-spark's names are
``_row-id-col-<uuid>`` / ``_row-commit-version-col-<uuid>``, :func:`new_column_names`); they
are not table columns, so readers that read by the table's schema never show them.

An UPDATE or MERGE that writes a row's new version into a new file writes its old id into
the row-id column (:func:`stable_ids`) and null into the commit-version column (the row
changed: it takes the new file's ``defaultRowCommitVersion``); a row a MERGE inserts gets
nulls in both (a fresh id: the new file's ``baseRowId`` plus its position), as delta-spark's
DML writes them (:func:`with_columns`). :mod:`.log_writer` gives the new files their
``baseRowId`` and moves the high water mark.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakefeed.core import storage
from lakefeed.core.errors import DeltaError
from lakefeed.delta import files
from lakefeed.delta.errors import FEATURE_UNSUPPORTED

FEATURE = "rowTracking"
ENABLE = "delta.enableRowTracking"
ROW_ID_NAME = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_NAME = "delta.rowTracking.materializedRowCommitVersionColumnName"
REQUIRES = ("domainMetadata",)
"""Writer features row tracking needs beside itself (PROTOCOL.md: its high water mark is a
domain)."""


@dataclass(frozen=True)
class Materialized:
    """The names of a table's materialized row-id and row-commit-version columns."""

    row_id: str
    commit_version: str

    def fields(self) -> list[pa.Field]:
        """The two columns as a new data file stores them after the table's columns."""
        return [pa.field(self.row_id, pa.int64()), pa.field(self.commit_version, pa.int64())]


def is_on(configuration: Mapping[str, str]) -> bool:
    """Whether ``configuration`` turns row tracking on (``delta.enableRowTracking=true``)."""
    return any(
        k.lower() == ENABLE.lower() and str(v).lower() == "true" for k, v in configuration.items()
    )


def new_column_names(configuration: Mapping[str, str]) -> dict[str, str]:
    """The materialized column names a table turning row tracking on gets, as delta-spark
    names them; names ``configuration`` has already are kept."""
    wanted = {ROW_ID_NAME: "_row-id-col-", COMMIT_VERSION_NAME: "_row-commit-version-col-"}
    return {
        key: f"{prefix}{uuid.uuid4()}" for key, prefix in wanted.items() if key not in configuration
    }


def materialized(
    writer_features: Sequence[str], configuration: Mapping[str, str], root: str
) -> Materialized | None:
    """The materialized columns rows moved to new files must carry; None where row tracking
    is not on (ids need not survive a change then, as in delta-spark)."""
    if FEATURE not in writer_features or not is_on(configuration):
        return None
    row_id, version = configuration.get(ROW_ID_NAME), configuration.get(COMMIT_VERSION_NAME)
    if not row_id or not version:
        raise DeltaError(
            f"the Delta table {root} has row tracking on ({ENABLE}=true) but its configuration "
            f"lacks {ROW_ID_NAME} or {COMMIT_VERSION_NAME}, so the rows a change moves cannot "
            "keep their ids; nothing was written",
            fix="repair the table's properties with delta-spark, or turn row tracking off",
            code=FEATURE_UNSUPPORTED,
        )
    return Materialized(row_id, version)


def stable_ids(
    root: str,
    adds: Sequence[dict[str, Any]],
    which: np.ndarray,
    positions: np.ndarray,
    column: str,
) -> pa.Array:
    """The row ids of rows by where they are: ``adds[which[i]]``'s file, at ``positions[i]``
    (the materialized id when the file has one for the row, else ``baseRowId`` + position)."""
    out = np.empty(len(which), dtype=np.int64)
    for index in np.unique(which):
        at = which == index
        out[at] = _file_ids(root, adds[index], positions[at], column)
    return pa.array(out, pa.int64())


def _file_ids(root: str, add: dict[str, Any], positions: np.ndarray, column: str) -> np.ndarray:
    base = add.get("baseRowId")
    if base is None:
        raise DeltaError(
            f"the data file {add['path']} of the Delta table {root} has no baseRowId although "
            "the table has row tracking on, so its rows' ids are unknown; nothing was written",
            fix="repair the table with delta-spark (its row tracking backfill assigns them)",
            code=FEATURE_UNSUPPORTED,
        )
    ids = int(base) + positions.astype(np.int64)
    stored = _stored(root, add, column)
    if stored is None:
        return ids
    kept = pc.coalesce(stored.take(pa.array(positions)).cast(pa.int64()), pa.array(ids))
    return kept.to_numpy(zero_copy_only=False)


def _stored(root: str, add: dict[str, Any], column: str) -> pa.Array | None:
    """The file's materialized ``column`` (None when the file does not have one)."""
    fs, path = storage.filesystem(files.local_path(root, add["path"]))
    parquet = pq.ParquetFile(fs.open_input_file(path))
    if column not in parquet.schema_arrow.names:
        return None
    return parquet.read(columns=[column]).column(column).combine_chunks()


def with_columns(rows: pa.Table, ids: pa.Array, names: Materialized) -> pa.Table:
    """``rows`` with the materialized columns after the table's: ``ids`` (null: a fresh id)
    and a null commit version (each row changed in this commit)."""
    versions = pa.nulls(rows.num_rows, pa.int64())
    row_id, commit_version = names.fields()
    return rows.append_column(row_id, ids).append_column(commit_version, versions)


def without_stats(written: files.WrittenFile, names: Materialized) -> files.WrittenFile:
    """``written`` without statistics of the materialized columns: Delta keeps statistics of
    the table's columns only, and these are not table columns."""
    stats = json.loads(written.stats)
    for kind in ("minValues", "maxValues", "nullCount"):
        for name in (names.row_id, names.commit_version):
            stats.get(kind, {}).pop(name, None)
    return replace(written, stats=json.dumps(stats, separators=(",", ":")))
