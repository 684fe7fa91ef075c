"""AUTO CDC FROM SNAPSHOT with a snapshot function: three versions of a small customers table
(a changed row, a deleted key, a new key, a re-inserted key), kept as SCD1 and as SCD2 (the DLT
spelling), and as SCD2 again versioned by timestamps; and from a view read whole, the snapshot
configuration ``snapshot.export`` picks."""

import datetime as dt

import dlt

import lakefeed as lf

SNAPSHOTS = {
    1: [(1, "ann", "DE"), (2, "bob", "FR"), (3, "cy", "NL")],
    2: [(1, "ann", "PL"), (3, "cy", "NL"), (4, "dee", "SE")],  # 1 moved, 2 gone, 4 new
    3: [(1, "ann", "PL"), (2, "bob", "US"), (4, "dee", "SE")],  # 2 back, 3 gone
}


SCHEMA = "id BIGINT, name STRING, country STRING"


def next_snapshot(latest_snapshot_version):
    version = (latest_snapshot_version or 0) + 1
    if version not in SNAPSHOTS:
        return None
    rows = SNAPSHOTS[version]
    return spark.createDataFrame(rows, SCHEMA), version  # noqa: F821


lf.create_streaming_table("customers")
lf.create_auto_cdc_from_snapshot_flow(target="customers", source=next_snapshot, keys=["id"])

dlt.create_streaming_table("customers_history")
dlt.apply_changes_from_snapshot(
    target="customers_history",
    source=next_snapshot,
    keys=["id"],
    stored_as_scd_type=2,
    track_history_except_column_list=["name"],
)

TAKEN = {version: dt.datetime(2026, 1, version, 6, 30, tzinfo=dt.UTC) for version in SNAPSHOTS}


def next_snapshot_taken(latest_snapshot_version):
    """The same snapshots, versioned by when they were taken (DLT allows timestamps)."""
    newer = [
        v
        for v, at in TAKEN.items()
        if latest_snapshot_version is None or at > latest_snapshot_version
    ]
    if not newer:
        return None
    return spark.createDataFrame(SNAPSHOTS[min(newer)], SCHEMA), TAKEN[min(newer)]  # noqa: F821


lf.create_streaming_table("customers_history_taken")
lf.create_auto_cdc_from_snapshot_flow(
    target="customers_history_taken",
    source=next_snapshot_taken,
    keys=["id"],
    stored_as_scd_type=2,
    track_history_except_column_list=["name"],
)


@lf.view
def customers_export():
    return spark.createDataFrame(SNAPSHOTS[int(lf.config("snapshot.export", "1"))], SCHEMA)  # noqa: F821


lf.create_streaming_table("customers_exported")
lf.create_auto_cdc_from_snapshot_flow(
    target="customers_exported", source="customers_export", keys=["id"]
)
