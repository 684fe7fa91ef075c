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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from deltalake import DeltaTable

from lakefeed.delta import log_writer
from lakefeed.delta.upgrade import LEGACY_WRITER, MAX_READER, MAX_WRITER

ENABLE_DV = "delta.enableDeletionVectors"
ENABLING = {
    ENABLE_DV: "deletionVectors",
    "delta.enableChangeDataFeed": "changeDataFeed",
    "delta.appendOnly": "appendOnly",
}
"""Properties that, set to ``true``, need their writer feature in the protocol."""
READER_WRITER = frozenset({"deletionVectors"})


def needed(table: DeltaTable, changed: Mapping[str, str]) -> bool:
    """Whether ``changed`` must be committed here rather than by delta-rs (the module doc)."""
    protocol = table.protocol()
    return protocol.min_writer_version == MAX_WRITER or _on(changed, ENABLE_DV)


def after_create(settings: dict[str, str]) -> dict[str, str]:
    """Take out of ``settings`` (a new table's properties) what delta-rs's create would turn
    into a damaged protocol, to be set by :func:`set_properties` right after it."""
    return {k: settings.pop(k) for k in list(settings) if _on({k: settings[k]}, ENABLE_DV)}


def _on(properties: Mapping[str, str], key: str) -> bool:
    return any(k.lower() == key.lower() and str(v).lower() == "true" for k, v in properties.items())


def set_properties(root: str, table: DeltaTable, changed: Mapping[str, str]) -> int:
    """Commit ``changed`` into the properties of ``table`` (at ``root``); the new version."""
    metadata = table.metadata()
    configuration = {**metadata.configuration, **changed}
    properties = {"properties": json.dumps(dict(changed))}
    actions = [log_writer.commit_info("SET TBLPROPERTIES", properties, blind_append=True)]
    protocol = with_features(table, {f for key, f in ENABLING.items() if _on(changed, key)})
    if protocol is not None:
        actions.append({"protocol": protocol})
    columns = list(metadata.partition_columns)
    actions.append(
        log_writer.metadata_action(table, table.schema().to_json(), configuration, columns)
    )
    version = log_writer.commit_actions(root, table.version(), actions, set(), None)
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
