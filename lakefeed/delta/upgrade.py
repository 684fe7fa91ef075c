"""A Delta table's protocol: raising its reader/writer versions, adding table features, and
refusing table properties that would turn on what lakefeed cannot honour.

A protocol change is only made when lakefeed can still read and write the table afterwards:
features whose readers must do more than read Parquet files (deletion vectors, column mapping),
whose writers must add to every commit (row tracking: the property turning it on does that,
:mod:`.tblprops`), or that delta-rs then refuses to write (identity columns, domain metadata,
V2 checkpoints) are refused with what to do instead.
delta-spark's ``upgradeTableProtocol`` / ``addFeatureSupport`` are a surface over it
(:mod:`lakefeed.compat.delta_spark.protocol`).
"""

from __future__ import annotations

from deltalake import DeltaTable as RsTable

from lakefeed.delta.errors import (
    PROTOCOL_DOWNGRADE,
    PROTOCOL_VERSION,
    UNSUPPORTED,
    DeltaOperationError,
)
from lakefeed.delta.operations import commit_properties, run
from lakefeed.delta.properties import (
    FEATURES,
    MAX_LEGACY_WRITER,
    check_protocol,
    refuse_feature,
)

MAX_READER, MAX_WRITER = 3, 7
# The features each legacy writer version implies (PROTOCOL.md), kept when the table moves to
# table features (delta-rs would list only the one added).
LEGACY_WRITER = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}


def upgrade(table: RsTable, root: str, reader: int, writer: int) -> None:
    """Raise the table's legacy protocol to ``(reader, writer)``; never lower (Delta's rule).

    Table features (writer 7, reader 3) come with :func:`add_feature`, which names what the
    table then supports; delta-rs's own upgrade to them lists features lakefeed cannot honour.
    """
    protocol = table.protocol()
    if reader < protocol.min_reader_version or writer < protocol.min_writer_version:
        raise DeltaOperationError(
            f"protocol version cannot be downgraded from ({protocol.min_reader_version}, "
            f"{protocol.min_writer_version}) to ({reader}, {writer})",
            fix="give versions at least the table's current ones (DeltaTable.detail() shows them)",
            code=PROTOCOL_DOWNGRADE,
        )
    if not 1 <= reader <= MAX_READER or not 2 <= writer <= MAX_WRITER:
        raise DeltaOperationError(
            f"protocol ({reader}, {writer}) is not one Delta defines: reader versions go up to "
            f"{MAX_READER}, writer versions from 2 up to {MAX_WRITER}",
            fix="use reader 1-3 and writer 2-7",
            code=PROTOCOL_VERSION,
        )
    if reader == MAX_READER or writer > MAX_LEGACY_WRITER:
        raise DeltaOperationError(
            f"upgradeTableProtocol({reader}, {writer}) is not supported by lakefeed: writer 6 "
            "implies identity columns, which delta-rs cannot write, and table features (reader "
            "3, writer 7) are added one by one",
            fix="use addFeatureSupport(name) for table features (it moves the table to writer "
            "7, and reader 3 for a reader feature); writer versions up to 5 work here",
            code=UNSUPPORTED,
        )
    wanted = {"delta.minReaderVersion": str(reader), "delta.minWriterVersion": str(writer)}
    run(
        "UPGRADE PROTOCOL",
        root,
        lambda: table.alter.set_table_properties(wanted, commit_properties=commit_properties(None)),
    )


def add_feature(table: RsTable, root: str, name: str) -> None:
    """Add support for the feature Delta calls ``name``; a legacy table moves to table features
    with the features its versions implied."""
    if name not in FEATURES:
        refuse_feature(name)
    protocol = table.protocol()
    implied = [
        feature
        for version, features in LEGACY_WRITER.items()
        if protocol.min_writer_version < MAX_WRITER and version <= protocol.min_writer_version
        for feature in features
    ]
    if protocol.min_reader_version == 2:
        implied.append("columnMapping")  # reader 2 is column mapping's version
    for feature in implied:
        if feature not in FEATURES:
            refuse_feature(
                feature,
                f"the table's protocol ({protocol.min_reader_version}, "
                f"{protocol.min_writer_version}) implies {feature!r}, which table features "
                "would then list: ",
            )
    wanted = [FEATURES[feature] for feature in dict.fromkeys([*implied, name])]
    run(
        "ADD FEATURE",
        root,
        lambda: table.alter.add_feature(
            wanted, allow_protocol_versions_increase=True, commit_properties=commit_properties(None)
        ),
    )


check_properties = check_protocol
"""The name the table builder, ``CREATE TABLE`` and delta-spark's surface check properties by."""
