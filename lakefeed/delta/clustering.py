"""Liquid clustering's table side (Spark's types, no session): which columns cluster a table,
and making a table clustered (PROTOCOL.md "Clustered Table").

A clustered table lists the writer features ``clustering`` and ``domainMetadata`` and holds the
domain ``delta.clustering`` with its clustering columns (physical names under column mapping,
each a path of field names). Its writers must write statistics of those columns (lakefeed's
files carry them for every top-level column of a type with bounds) and commit through lakefeed
(:mod:`.features`). lakefeed does not cluster files (delta-spark does so in OPTIMIZE): a table
it clusters is laid out as it is written, and readers prune it by the statistics.

Creating one is the table's creation followed by one commit that adds the two features and the
domain, as delta-spark's ``ALTER TABLE ... CLUSTER BY`` would (:func:`cluster`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import types as T

from lakefeed.delta import log, log_writer, post_commit
from lakefeed.delta.errors import (
    CLUSTER_BY_COLUMNS,
    CLUSTER_BY_PARTITIONED,
    CLUSTER_BY_STATS,
    COLUMN_MISSING,
    DeltaOperationError,
)

DOMAIN = "delta.clustering"
FEATURES = ("clustering", "domainMetadata")
MAX_COLUMNS = 4
"""Delta's limit on clustering columns (``DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS``)."""
LEGACY_WRITER = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
}
"""The features each legacy writer version implies (PROTOCOL.md), listed when the table moves
to table features."""


def check_new(
    display: str,
    columns: Sequence[T.StructField],
    partition_by: Sequence[str],
    clustered_by: Sequence[str],
) -> list[str]:
    """The clustering columns of new table ``display`` as its schema spells them, after Delta's
    checks: not with partitioning, at most four, top-level columns of the table whose type
    has statistics."""
    if partition_by:
        raise DeltaOperationError(
            f"table {display}: Clustering and partitioning cannot both be specified. Please "
            "remove PARTITIONED BY if you want to create a Delta table with clustering",
            fix="keep one of partitionedBy / PARTITIONED BY / partition_cols and clusterBy / "
            "CLUSTER BY / cluster_by",
            code=CLUSTER_BY_PARTITIONED,
        )
    if len(clustered_by) > MAX_COLUMNS:
        raise DeltaOperationError(
            f"table {display}: CLUSTER BY supports up to {MAX_COLUMNS} clustering columns, "
            f"but the table has {len(clustered_by)} clustering columns",
            fix=f"cluster by at most {MAX_COLUMNS} columns",
            code=CLUSTER_BY_COLUMNS,
        )
    by_name = {field.name.lower(): field for field in columns}
    found = []
    for name in clustered_by:
        field = by_name.get(name.lower())
        if field is None:
            raise DeltaOperationError(
                f"table {display}: clustering column {name!r} is not in the schema "
                f"{[f.name for f in columns]}",
                fix="cluster by top-level columns of the table",
                code=COLUMN_MISSING,
            )
        if not _has_stats(field.dataType):
            raise DeltaOperationError(
                f"table {display}: clustering column {field.name!r} "
                f"({field.dataType.simpleString()}) has no statistics lakefeed writes: "
                "liquid clustering requires clustering columns to have stats",
                fix="cluster by numeric, string, date or timestamp columns",
                code=CLUSTER_BY_STATS,
            )
        found.append(field.name)
    return found


def _has_stats(kind: T.DataType) -> bool:
    """Types lakefeed's files carry minimum and maximum values of (:mod:`.stats`)."""
    return isinstance(
        kind,
        T.ByteType
        | T.ShortType
        | T.IntegerType
        | T.LongType
        | T.FloatType
        | T.DoubleType
        | T.StringType
        | T.DateType
        | T.TimestampType
        | T.TimestampNTZType,
    )


def cluster(root: str, columns: Sequence[str]) -> int:
    """Make the new table at ``root`` clustered by ``columns`` (logical names): one commit
    adding the features and the ``delta.clustering`` domain; the version committed."""
    table = log.rs_table(root)
    mapping = log.table_mapping(table)
    physical = mapping.physical_names() if mapping.active else {}
    by_lower = {field.name.lower(): field.name for field in table.schema().fields}
    names = [by_lower[name.lower()] for name in columns]
    domain = {"clusteringColumns": [[physical.get(name, name)] for name in names]}
    actions = [
        log_writer.commit_info("CLUSTER BY", {"newClusteringColumns": ",".join(names)}),
        {"protocol": _protocol(table)},
        {
            "domainMetadata": {
                "domain": DOMAIN,
                "configuration": json.dumps(domain, separators=(",", ":")),
                "removed": False,
            }
        },
    ]
    read = table.version()
    version = log_writer.commit_actions(root, read, actions, set(), None, rebase=False)
    configuration = table.metadata().configuration
    post_commit.run(root, configuration, version, read, lambda: log.rs_table(root))
    return version


def _protocol(table: DeltaTable) -> dict[str, Any]:
    """The table's protocol with the clustering features: writer 7 listing them and the
    features its legacy writer version implied."""
    old = table.protocol()
    writer = set(old.writer_features or [])
    if old.min_writer_version < 7:
        implied = [names for v, names in LEGACY_WRITER.items() if v <= old.min_writer_version]
        writer |= {name for names in implied for name in names}
    protocol: dict[str, Any] = {
        "minReaderVersion": old.min_reader_version,
        "minWriterVersion": 7,
        "writerFeatures": sorted(writer | set(FEATURES)),
    }
    if old.min_reader_version >= 3:
        protocol["readerFeatures"] = sorted(old.reader_features or [])
    return protocol


def columns_of(root: str, table: DeltaTable) -> list[str]:
    """The table's clustering columns by logical name (empty when it is not clustered)."""
    found = log_writer.domain(root, table.version(), DOMAIN)
    if found is None:
        return []
    logical = {v: k for k, v in log.table_mapping(table).physical_names().items()}
    paths = json.loads(found).get("clusteringColumns") or []
    return [".".join(logical.get(part, part) for part in path) for path in paths]


def kept_in(root: str, table: DeltaTable, schema: pa.Schema) -> None:
    """Refuse a new schema (an ``overwriteSchema`` write's) without a clustering column."""
    missing = [c for c in columns_of(root, table) if c.split(".")[0] not in schema.names]
    if missing:
        raise DeltaOperationError(
            f"the new schema of the clustered Delta table {root} drops its clustering "
            f"column(s) {missing}",
            fix="keep the clustering columns in the written rows",
            code=COLUMN_MISSING,
        )
