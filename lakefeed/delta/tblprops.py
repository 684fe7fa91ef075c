"""Setting a table's properties in a commit lakefeed writes itself, where delta-rs's would
damage the protocol.

deltalake 1.6.6's ``set_table_properties`` (and ``DeltaTable.create`` with
``delta.enableDeletionVectors``) adds ``variantType`` to the ``readerFeatures`` and
``writerFeatures`` of any table at reader version 3 (checked: a table with deletion vectors or
timestampNtz gets it on setting any key), a feature the table does not use and lakefeed's
readers refuse. So on a table with table features (writer 7), and to turn deletion vectors on,
the properties go in a commit written here (:func:`lakefeed.delta.log_writer.commit_actions`):
the table's ``metaData`` with the new ``configuration`` and, when a property turns a feature on,
the ``protocol`` with it, as delta-spark's ``ALTER TABLE ... SET TBLPROPERTIES`` writes them.
Turning deletion vectors on moves a table to reader 3 / writer 7 with ``deletionVectors``
beside the features its legacy versions implied (PROTOCOL.md).

Turning row tracking on (``delta.enableRowTracking=true``, at creation or later) adds
``rowTracking`` and ``domainMetadata`` to the writer features, names the materialized
columns (:func:`.row_tracking.new_column_names`) and, as delta-spark's backfill does, gives the
files already there row ids: the same commit adds each live file without a ``baseRowId``
back (``dataChange`` false) with the ids after the high water mark. delta-spark backfills in
several commits; this is one, which any commit in between fails (nothing was then written),
and a table of more than :data:`BACKFILL_FILES` files is refused (its commit would hold an
action per file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from deltalake import DeltaTable

from lakefeed.core.errors import DeltaError
from lakefeed.delta import log_writer, row_tracking
from lakefeed.delta.errors import FEATURE_UNSUPPORTED
from lakefeed.delta.upgrade import LEGACY_WRITER, MAX_READER, MAX_WRITER

ENABLE_DV = "delta.enableDeletionVectors"
ENABLING = {
    ENABLE_DV: "deletionVectors",
    "delta.enableChangeDataFeed": "changeDataFeed",
    "delta.appendOnly": "appendOnly",
    row_tracking.ENABLE: row_tracking.FEATURE,
}
"""Properties that, set to ``true``, need their writer feature in the protocol."""
READER_WRITER = frozenset({"deletionVectors"})
BACKFILL_FILES = 100_000
"""The most files turning row tracking on gives row ids in its one commit."""


def needed(table: DeltaTable, changed: Mapping[str, str]) -> bool:
    """Whether ``changed`` must be committed here rather than by delta-rs (the module doc)."""
    protocol = table.protocol()
    return protocol.min_writer_version == MAX_WRITER or _here(changed)


def _here(changed: Mapping[str, str]) -> bool:
    """Properties delta-rs cannot set: turning deletion vectors or row tracking on."""
    return _on(changed, ENABLE_DV) or row_tracking.is_on(changed)


def after_create(settings: dict[str, str]) -> dict[str, str]:
    """Take out of ``settings`` (a new table's properties) what delta-rs's create would turn
    into a damaged protocol or refuse, to be set by :func:`set_properties` right after it."""
    return {k: settings.pop(k) for k in list(settings) if _here({k: settings[k]})}


def _on(properties: Mapping[str, str], key: str) -> bool:
    return any(k.lower() == key.lower() and str(v).lower() == "true" for k, v in properties.items())


def set_properties(root: str, table: DeltaTable, changed: Mapping[str, str]) -> int:
    """Commit ``changed`` into the properties of ``table`` (at ``root``); the new version."""
    metadata = table.metadata()
    configuration = {**metadata.configuration, **changed}
    tracking = row_tracking.is_on(changed) and not row_tracking.is_on(metadata.configuration)
    if tracking:
        configuration |= row_tracking.new_column_names(configuration)
    properties = {"properties": json.dumps(dict(changed))}
    backfill = _backfill(root, table) if tracking else []
    info = log_writer.commit_info("SET TBLPROPERTIES", properties, blind_append=not backfill)
    actions = [info]
    protocol = _protocol(table, changed)
    if protocol is not None:
        actions.append({"protocol": protocol})
    columns = list(metadata.partition_columns)
    actions.append(
        log_writer.metadata_action(table, table.schema().to_json(), configuration, columns)
    )
    actions += [{"add": add} for add in backfill]
    writers = (protocol or {}).get("writerFeatures") or table.protocol().writer_features or []
    version = log_writer.commit_actions(
        root,
        table.version(),
        actions,
        {add["path"] for add in backfill},
        None,
        rebase=not tracking,  # files committed in between would have no row ids
        row_ids=row_tracking.FEATURE in writers,
    )
    table.update_incremental()
    return version


def add_features(root: str, table: DeltaTable, adding: set[str], operation: str) -> None:
    """Commit ``table``'s protocol with the writer features ``adding`` (a new table's, whose
    columns need them: delta-rs's create does not list them)."""
    protocol = with_features(table, adding)
    if protocol is not None:
        info = log_writer.commit_info(operation, {"features": json.dumps(sorted(adding))})
        log_writer.commit_actions(
            root, table.version(), [info, {"protocol": protocol}], set(), None
        )
        table.update_incremental()


def _backfill(root: str, table: DeltaTable) -> list[dict[str, Any]]:
    """The live files without row ids, as ``add`` actions that give them ids (the module
    doc)."""
    live = log_writer.live_files(root, table.version()) if table.version() >= 0 else {}
    if live is None:
        raise DeltaError(
            f"turning row tracking on for the Delta table {root} is refused: its log could not "
            "be replayed here (a file of it is missing), so its files cannot get row ids; "
            "nothing was written",
            fix="turn it on with delta-spark, or restore the table's log",
            code=FEATURE_UNSUPPORTED,
        )
    backfill = [
        {**add, "dataChange": False} for add in live.values() if add.get("baseRowId") is None
    ]
    if len(backfill) > BACKFILL_FILES:
        raise DeltaError(
            f"turning row tracking on for the Delta table {root} is refused: {len(backfill)} of "
            f"its files need row ids, more than the {BACKFILL_FILES} lakefeed gives ids in its "
            "one commit; nothing was written",
            fix="turn it on with delta-spark (its backfill takes several commits), or compact "
            "the table first",
            code=FEATURE_UNSUPPORTED,
        )
    return backfill


def _protocol(table: DeltaTable, changed: Mapping[str, str]) -> dict[str, Any] | None:
    """The protocol with the features ``changed`` turns on; None when it has them already."""
    adding = {feature for key, feature in ENABLING.items() if _on(changed, key)}
    if row_tracking.FEATURE in adding:
        adding |= set(row_tracking.REQUIRES)
    return with_features(table, adding)


def with_features(table: DeltaTable, adding: set[str]) -> dict[str, Any] | None:
    """The protocol with the features ``adding``; None when it has them already."""
    protocol = table.protocol()
    readers = set(protocol.reader_features or [])
    writers = set(protocol.writer_features or [])
    if protocol.min_writer_version < MAX_WRITER:
        writers |= {
            feature
            for version, implied in LEGACY_WRITER.items()
            if version <= protocol.min_writer_version
            for feature in implied
        }
    if protocol.min_reader_version == 2:
        readers.add("columnMapping")
    if adding <= writers and (adding & READER_WRITER) <= readers:
        return None
    readers |= adding & READER_WRITER
    reader = MAX_READER if readers else max(protocol.min_reader_version, 1)
    return {
        "minReaderVersion": reader,
        "minWriterVersion": MAX_WRITER,
        **({"readerFeatures": sorted(readers)} if reader == MAX_READER else {}),
        "writerFeatures": sorted(writers | adding),
    }
