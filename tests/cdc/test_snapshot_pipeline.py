"""AUTO CDC FROM SNAPSHOT in a pipeline run: three snapshot versions from a function, applied
as SCD1 and SCD2 in one update, a second update applies nothing again; a view read whole, one
snapshot per update."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import lakefeed as lf
from lakefeed.cdc import snapshot as snap
from lakefeed.cdc.snapshot import snapshot_app_id
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.pipeline.kinds import RunMode
from tests.cdc import model
from tests.pipeline.support import load

PIPELINE = Path(__file__).parent / "snapshot_pipeline"


@pytest.fixture(scope="module")
def lakehouse(spark, tmp_path_factory: pytest.TempPathFactory) -> Lakehouse:
    lakehouse = Lakehouse.at(tmp_path_factory.mktemp("snapshots") / "lakehouse")
    pipeline = load([PIPELINE], {"snapshot.export": "2"})
    result = lf.run(pipeline, lakehouse=lakehouse, spark=spark, mode=RunMode.AVAILABLE_NOW)
    assert result.ok, result
    return lakehouse


@pytest.mark.spark
def test_scd1_holds_the_newest_snapshot(lakehouse: Lakehouse) -> None:
    assert model.rows(lakehouse, "customers", ["id"]) == [
        {"id": 1, "name": "ann", "country": "PL"},
        {"id": 2, "name": "bob", "country": "US"},
        {"id": 4, "name": "dee", "country": "SE"},
    ]


@pytest.mark.spark
def test_scd2_has_a_version_per_snapshot_change(lakehouse: Lakehouse) -> None:
    history = model.rows(lakehouse, "customers_history", ["id", "__START_AT"])
    assert [(r["id"], r["country"], r["__START_AT"], r["__END_AT"]) for r in history] == [
        (1, "DE", 1, 2),
        (1, "PL", 2, None),
        (2, "FR", 1, 2),  # missing from snapshot 2: closed
        (2, "US", 3, None),  # back in snapshot 3: a new version
        (3, "NL", 1, 3),
        (4, "SE", 2, None),
    ]


@pytest.mark.spark
def test_scd2_versioned_by_timestamps_starts_and_ends_at_them(lakehouse: Lakehouse) -> None:
    """The same snapshots with timestamp versions: __START_AT / __END_AT are those timestamps,
    and the flow's txn (microseconds, under the timestamp app id) names the last one."""
    from deltalake import DeltaTable

    taken = {1: "2026-01-01", 2: "2026-01-02", 3: "2026-01-03"}
    at = {v: dt.datetime.fromisoformat(f"{d}T06:30:00+00:00") for v, d in taken.items()}
    history = model.rows(lakehouse, "customers_history_taken", ["id", "__START_AT"])
    assert [(r["id"], r["country"], r["__START_AT"], r["__END_AT"]) for r in history] == [
        (1, "DE", at[1], at[2]),
        (1, "PL", at[2], None),
        (2, "FR", at[1], at[2]),
        (2, "US", at[3], None),
        (3, "NL", at[1], at[3]),
        (4, "SE", at[2], None),
    ]
    path = str(lakehouse.table_path("customers_history_taken"))
    app_id = snapshot_app_id("customers_history_taken_snapshot_cdc") + snap.TIMESTAMP.suffix
    assert DeltaTable(path).transaction_version(app_id) == snap.txn_version(at[3])


@pytest.mark.spark
def test_a_view_is_read_whole_as_snapshot_1(lakehouse: Lakehouse) -> None:
    assert model.rows(lakehouse, "customers_exported", ["id"]) == [
        {"id": 1, "name": "ann", "country": "PL"},
        {"id": 3, "name": "cy", "country": "NL"},
        {"id": 4, "name": "dee", "country": "SE"},
    ]


@pytest.mark.spark
def test_a_second_update_applies_nothing_again(spark, lakehouse: Lakehouse) -> None:
    from deltalake import DeltaTable

    paths = [str(lakehouse.table_path(t)) for t in ("customers", "customers_history")]
    before = [DeltaTable(p).version() for p in paths]
    pipeline = load([PIPELINE], {"snapshot.export": "3"})
    result = lf.run(pipeline, lakehouse=lakehouse, spark=spark, mode=RunMode.AVAILABLE_NOW)
    assert result.ok, result
    assert [DeltaTable(p).version() for p in paths] == before
    versions = [
        DeltaTable(p).transaction_version(snapshot_app_id(f))
        for p, f in zip(
            paths, ("customers_snapshot_cdc", "customers_history_snapshot_cdc"), strict=True
        )
    ]
    assert versions == [3, 3]  # the last snapshot applied, recorded in the target's commits
    # the view's snapshot is read again: version 2 of that flow, with the view's new rows
    assert model.rows(lakehouse, "customers_exported", ["id"]) == [
        {"id": 1, "name": "ann", "country": "PL"},
        {"id": 2, "name": "bob", "country": "US"},
        {"id": 4, "name": "dee", "country": "SE"},
    ]
    exported = DeltaTable(str(lakehouse.table_path("customers_exported")))
    assert exported.transaction_version(snapshot_app_id("customers_exported_snapshot_cdc")) == 2
