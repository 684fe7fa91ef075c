"""AUTO CDC FROM SNAPSHOT (DLT's ``create_auto_cdc_from_snapshot_flow`` /
``apply_changes_from_snapshot``): full snapshots of a source turned into changes of a target.

A snapshot comes from a dataset of the pipeline, read whole once per update (versions 1, 2, ...
counted by the flow), or from the user's function ``(latest_snapshot_version) -> (DataFrame,
version) | None``, called with the newest version applied (None at first) until it returns
None; as in DLT, a version is an integer or a timestamp (a ``datetime``, one type per flow).
Each snapshot becomes change rows at sequence ``version``: every row an upsert, and a
delete for each key that is live in the state table and missing from the snapshot. Those rows
go through AUTO CDC's own ``foreachBatch`` (:class:`~lakefeed.cdc.apply.ApplyChanges`, with
``sequence_by`` the version), so the SCD1/SCD2 rules of :mod:`lakefeed.cdc.fold` decide what
changed (an unchanged row writes nothing to the target), and the version is the ``txn`` version
of the commits applying it: a rerun after a crash asks for the snapshot after the one applied
last, and a snapshot is never applied twice. A ``txn`` version is a long, so a timestamp version
is kept as microseconds since the epoch under an app id naming its type (:class:`VersionKind`),
from which ``latest_snapshot_version`` is given back as the same kind of ``datetime``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lakefeed.cdc import fold
from lakefeed.cdc.apply import ApplyChanges, join_on_keys
from lakefeed.cdc.errors import INVALID
from lakefeed.cdc.spec import AutoCdc
from lakefeed.core.errors import PipelineDefinitionError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

VERSION = "__snapshot_version"
OP = "__snapshot_op"
SnapshotVersion = int | dt.datetime
SnapshotFunction = Callable[[Any], "tuple[DataFrame, SnapshotVersion] | None"]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class VersionKind:
    """One type of snapshot version: how it is named, the suffix of the ``txn`` app id its
    versions are committed under, and the Spark type of the change rows' version column (so an
    SCD2 target's ``__START_AT`` / ``__END_AT`` have the version's type, as in DLT)."""

    name: str
    suffix: str
    spark_type: str


INTEGER = VersionKind("integer", "", "bigint")
TIMESTAMP = VersionKind("timestamp", ":timestamp", "timestamp")
TIMESTAMP_NTZ = VersionKind("timestamp without time zone", ":timestamp_ntz", "timestamp_ntz")
KINDS = (INTEGER, TIMESTAMP, TIMESTAMP_NTZ)


def kind_of(version: object) -> VersionKind | None:
    """The kind of a version the snapshot function returned (None: not a valid version)."""
    if isinstance(version, bool):
        return None
    if isinstance(version, int):
        return INTEGER
    if isinstance(version, dt.datetime):
        return TIMESTAMP if version.tzinfo is not None else TIMESTAMP_NTZ
    return None


def txn_version(version: SnapshotVersion) -> int:
    """The ``txn`` version (a long) a snapshot version is committed as; order is kept. A
    timestamp without zone counts as UTC wall-clock time."""
    if isinstance(version, dt.datetime):
        instant = version if version.tzinfo is not None else version.replace(tzinfo=dt.UTC)
        return (instant - _EPOCH) // _MICROSECOND
    return version


def from_txn(kind: VersionKind, committed: int) -> SnapshotVersion:
    """The snapshot version a ``txn`` version of ``kind`` was committed from (timestamps in
    UTC, with a zone when the function gave one)."""
    if kind is INTEGER:
        return committed
    when = _EPOCH + committed * _MICROSECOND
    return when if kind is TIMESTAMP else when.replace(tzinfo=None)


def version_literal(version: SnapshotVersion) -> Column:
    """The version as a Spark literal of its kind's type (timestamps as exact text, so neither
    the driver's nor the session's time zone moves them)."""
    # deferred: pyspark loads only when this runs
    from pyspark.sql import functions as F

    kind = kind_of(version) or INTEGER
    if isinstance(version, dt.datetime):
        utc = version.astimezone(dt.UTC) if version.tzinfo is not None else version
        return F.lit(utc.isoformat()).cast(kind.spark_type)
    return F.lit(version).cast(kind.spark_type)


def declare(where: str, source: str | SnapshotFunction, **given: Any) -> AutoCdc:
    """The AUTO CDC flow a snapshot flow runs as: its change rows carry the version and op."""
    if not isinstance(source, str) and not callable(source):
        raise PipelineDefinitionError(
            f"AUTO CDC FROM SNAPSHOT ({where}): source {source!r} is neither a dataset name "
            "nor a function",
            fix="pass the name of a table or view, or a function (latest_snapshot_version) -> "
            "(DataFrame, version) or None",
            code=INVALID,
        )
    name = source if isinstance(source, str) else f"{getattr(source, '__name__', 'source')}()"
    return AutoCdc.declare(
        where,
        source=name,
        sequence_by=VERSION,
        apply_as_deletes=f"`{OP}` = 'D'",
        except_column_list=[VERSION, OP],
        **given,
    )


@dataclass(frozen=True)
class Snapshots:
    """Where a snapshot flow's snapshots come from, and the rule their versions follow: the
    user's function, or (``once_per_update``) one reading a dataset whole, asked once."""

    source: SnapshotFunction
    once_per_update: bool = False

    def next(self, latest: SnapshotVersion | None) -> tuple[DataFrame, SnapshotVersion] | None:
        """The snapshot after version ``latest`` and its version, or None."""
        got = self.source(latest)
        if got is None:
            return None
        if not (isinstance(got, tuple) and len(got) == 2):
            raise _refused(f"the snapshot function returned {type(got).__name__}")
        frame, version = got
        kind = kind_of(version)
        if kind is None:
            raise _refused(
                f"snapshot version {version!r} is neither an integer nor a timestamp (datetime)"
            )
        if latest is None:
            return frame, version
        applied = kind_of(latest)
        if kind is not applied:
            raise _refused(
                f"snapshot version {version!r} is of type {kind.name}, but the versions applied "
                f"so far are of type {applied.name if applied else '?'} ({latest!r} last); keep "
                "one type per flow, or run a full refresh of the target"
            )
        if version <= latest:  # type: ignore[operator]  # one kind: comparable
            raise _refused(f"snapshot version {version} is not newer than {latest}, applied last")
        return frame, version

    def shape(self) -> DataFrame:
        """Change rows shaped like this flow's (no rows): what validation derives the target's
        columns from. A function is asked for its first snapshot (lazily read)."""
        got = self.next(None)
        if got is None:
            raise _refused("the snapshot function returned None for the first snapshot")
        return with_change_columns(got[0], got[1], "U").limit(0)


def _refused(what: str) -> PipelineDefinitionError:
    return PipelineDefinitionError(
        f"AUTO CDC FROM SNAPSHOT: {what}",
        fix="return (DataFrame, version) with an integer or timestamp version larger than "
        "latest_snapshot_version (None at first), or None when there is no newer snapshot",
        code=INVALID,
    )


def with_change_columns(frame: DataFrame, version: SnapshotVersion, op: str) -> DataFrame:
    """``frame``'s rows as changes ``op`` (``U``/``D``) at sequence ``version``."""
    # deferred: pyspark loads only when this runs
    from pyspark.sql import functions as F

    return frame.withColumns({VERSION: version_literal(version), OP: F.lit(op)})


def changes(
    snapshot: DataFrame, state: DataFrame | None, cdc: AutoCdc, version: SnapshotVersion
) -> DataFrame:
    """The snapshot as change rows: every row an upsert (``U``; the fold leaves unchanged rows
    alone), and a delete (``D``) for each key the state holds as live that the snapshot lacks.

    Built from the snapshot and the state table only, never the target: the state is committed
    after the target, so a snapshot replayed after a crash between the two gives the same rows
    (see :mod:`lakefeed.cdc.apply`)."""
    # deferred: pyspark loads only when this runs
    from pyspark.sql import functions as F

    upserts = with_change_columns(snapshot, version, "U")
    if state is None:
        return upserts
    live = state.where(~F.coalesce(F.col(fold.DELETED), F.lit(False))).select(*cdc.keys)
    gone = join_on_keys(live, snapshot.select(*cdc.keys), cdc.keys, "left_anti")
    gone = gone.select(
        *[
            F.col(f"`{f.name}`")
            if f.name in cdc.keys
            else F.lit(None).cast(f.dataType).alias(f.name)
            for f in snapshot.schema.fields
        ]
    )
    return upserts.unionByName(with_change_columns(gone, version, "D"))


def snapshot_app_id(flow: str) -> str:
    """The ``txn`` app id of a snapshot flow's commits (the same in a backfill, which empties
    the tables first, so the versions start over)."""
    return f"lakefeed-snapshot-{flow}"


@dataclass
class ApplySnapshots:
    """Applies a snapshot flow's new snapshots to ``target`` (Delta table paths), exactly once:
    each as one :class:`ApplyChanges` batch whose ``txn`` version is the snapshot's."""

    cdc: AutoCdc
    snapshots: Snapshots
    target: str
    state: str
    app_id: str

    def __call__(self) -> list[SnapshotVersion]:
        """Apply every snapshot newer than the last one applied; the versions applied."""

        applied: list[SnapshotVersion] = []
        latest = self.latest()
        while True:
            got = self.snapshots.next(latest)
            if got is None:
                break
            snapshot, latest = got
            rows = changes(snapshot, self._state(snapshot.sparkSession), self.cdc, latest)
            app_id = self.app_id + (kind_of(latest) or INTEGER).suffix
            ApplyChanges(self.cdc, self.target, self.state, None, app_id)(rows, txn_version(latest))
            applied.append(latest)
            if self.snapshots.once_per_update:
                break
        return applied

    def latest(self) -> SnapshotVersion | None:
        """The newest snapshot version applied (None: none yet), as the state table's ``txn``
        has it: it commits last, so a snapshot the target holds but the state does not is
        applied again (the target's commit is skipped, the state's made). An empty snapshot of
        an empty target commits nothing; the loop moves past it in memory. The app id that has
        a ``txn`` tells the versions' kind (:meth:`Snapshots.next` keeps one kind per flow)."""
        # deferred, as this module's other imports: deltalake loads when a snapshot flow runs
        from lakefeed.delta import log
        from lakefeed.delta import table as delta_table

        if not delta_table.exists(self.state):
            return None
        table = log.open_table(self.state)
        for kind in KINDS:
            committed = table.transaction_version(self.app_id + kind.suffix)
            if committed is not None:
                return from_txn(kind, committed)
        return None

    def _state(self, spark: SparkSession) -> DataFrame | None:
        # deferred: pyspark and deltalake load when a snapshot flow runs
        from lakefeed.cdc.apply import read_table
        from lakefeed.delta import table as delta_table

        if not delta_table.exists(self.state):
            return None
        return read_table(spark, self.state)
