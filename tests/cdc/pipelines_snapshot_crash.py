"""The snapshot crash test's pipeline: numbered Parquet snapshots in a folder, applied as SCD1
and as SCD2 (whose history shows a snapshot lost, applied twice, or a state MERGE missed)."""

from pathlib import Path

import lakefeed as lf


def next_snapshot(latest_snapshot_version):
    version = (latest_snapshot_version or 0) + 1
    path = Path(lf.config("snapshots.folder")) / f"{version}.parquet"
    if not path.exists():
        return None
    return spark.read.parquet(str(path)), version  # noqa: F821


lf.create_streaming_table("customers")
lf.create_auto_cdc_from_snapshot_flow(target="customers", source=next_snapshot, keys=["id"])

lf.create_streaming_table("customers_history")
lf.create_auto_cdc_from_snapshot_flow(
    target="customers_history", source=next_snapshot, keys=["id"], stored_as_scd_type=2
)
