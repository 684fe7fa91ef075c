"""The checkpoint guard: a checkpoint knows which flow and tables it belongs to.

Streaming exactly-once rests on the pairing (checkpoint, target table). Five mistakes break it
silently in plain Spark, and lakefeed refuses each before the query starts:

- reusing a checkpoint for another flow or target (offsets of one source applied to another);
- a missing checkpoint beside a non-empty target (the stream re-reads its source from the start
  and duplicates everything already in the table);
- a change to a stateful flow that the saved state cannot serve (different keys/aggregates);
- a target table behind what its flow's checkpoint says was committed (a restored backup, a lost
  log object): the next batches would re-use the lost version numbers, and every stream that had
  read them skips the new rows for good;
- a checkpoint behind its table (restored from an older backup, its last batches deleted): its
  next batches would carry numbers the table holds, and be skipped as written (the batch right
  after the checkpoint's last is told apart from a replay at write time, by its source offsets:
  :mod:`lakefeed.delta.replay`);
- a Delta source table behind the version a flow's offsets say it read (the same loss, seen from
  the reading side).

The identity lives in ``<checkpoint>/_lakefeed.json``, written before the first batch. What a
flow committed needs no record of its own: every batch commits a Delta ``txn`` action (app id =
the query id in ``<checkpoint>/metadata``, version = the batch id) before Spark writes
``commits/<batch>``, so the table must hold the txn of the checkpoint's last committed batch. What
a Delta source read is its offset in ``<checkpoint>/offsets/<batch>``, which names the table by
its id (``reservoirId``) and the version it stands on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from lakefeed.connectors.delta import CONNECTOR as DELTA
from lakefeed.connectors.delta.offsets import DeltaOffset
from lakefeed.core.errors import DataLossRiskError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.storage import AnyPath, as_path, write_bytes
from lakefeed.delta import log, replay
from lakefeed.pipeline.api import Pipeline
from lakefeed.pipeline.errors import (
    FOREIGN,
    MISSING,
    OTHER_FLOW,
    SOURCE_RESET,
    STATE_CHANGED,
    TABLE_BEHIND,
    GuardError,
)
from lakefeed.spark import offset_log

IDENTITY_FILE = "_lakefeed.json"


@dataclass(frozen=True)
class Identity:
    pipeline: str
    flow: str
    target: str
    stateful: list[str] = field(default_factory=list)

    @property
    def fingerprint(self) -> str:
        """Hash of the stateful operators' shape; empty list = stateless."""
        return hashlib.sha256("\n".join(self.stateful).encode()).hexdigest()[:16]


def read_identity(checkpoint: AnyPath) -> Identity | None:
    path = checkpoint / IDENTITY_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return Identity(data["pipeline"], data["flow"], data["target"], list(data.get("stateful", [])))


def write_identity(checkpoint: AnyPath, identity: Identity) -> None:
    payload = {**asdict(identity), "fingerprint": identity.fingerprint}
    write_bytes(str(checkpoint / IDENTITY_FILE), json.dumps(payload, indent=2).encode())


def has_progress(checkpoint: AnyPath) -> bool:
    """True once Spark has planned at least one batch in this checkpoint."""
    offsets = checkpoint / "offsets"
    return offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())


def check(
    checkpoint: AnyPath,
    expected: Identity,
    target_has_rows: bool,
    full_refresh: bool = False,
    sink: bool = False,
) -> None:
    """Raise :class:`GuardError` naming the flow and the fix when the pairing is unsafe
    (``sink``: the flow fills a sink, not a table)."""
    if full_refresh:
        return
    flow = expected.flow
    refresh = f"lakefeed run PIPELINE --full-refresh {expected.target}"
    found = read_identity(checkpoint)
    if found is None and has_progress(checkpoint):
        raise GuardError(
            f"flow {flow!r}: checkpoint {checkpoint} was not created by lakefeed for this flow",
            fix=f"move it away, or rebuild the table with `{refresh}`",
            code=FOREIGN,
        )
    if found is not None and (found.flow, found.target) != (expected.flow, expected.target):
        raise GuardError(
            f"flow {flow!r}: checkpoint {checkpoint} belongs to flow {found.flow!r} writing "
            f"{found.target!r} (pipeline {found.pipeline!r}); reusing it would apply another "
            f"query's offsets here",
            fix=f"give each flow its own checkpoint, or `{refresh}`",
            code=OTHER_FLOW,
        )
    if not has_progress(checkpoint) and target_has_rows:
        kind = "sink" if sink else "target table"
        raise GuardError(
            f"flow {flow!r}: {kind} {expected.target!r} has rows but its checkpoint "
            f"{checkpoint} is missing; the stream would re-read its source from the start and "
            f"duplicate those rows",
            fix=f"restore the checkpoint; or empty the sink and send every row again with "
            f"`{refresh}`"
            if sink
            else f"restore the checkpoint, or rebuild with `{refresh}`",
            code=MISSING,
        )
    if found is not None and has_progress(checkpoint) and found.stateful != expected.stateful:
        raise GuardError(
            f"flow {flow!r}: its stateful operators changed since the checkpoint was written "
            f"(was {_short(found.stateful)}, now {_short(expected.stateful)}); "
            f"the saved state cannot serve the new query",
            fix=f"revert the change, or rebuild the table and its state with `{refresh}`",
            code=STATE_CHANGED,
        )


def _short(operators: list[str], width: int = 120) -> str:
    if not operators:
        return "stateless"
    return "; ".join(op if len(op) <= width else op[: width - 3] + "..." for op in operators)


def last_committed_batch(checkpoint: AnyPath) -> int | None:
    """The newest batch Spark recorded as done (``commits/<batch>``), None before the first."""
    done = offset_log.batch_ids(checkpoint / "commits")
    return max(done) if done else None


# --- table versions ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    """A streaming flow as the version check sees it: its checkpoint and the tables it writes."""

    name: str
    checkpoint: AnyPath
    targets: tuple[str, ...]  # table names: the flow's own table (and its quarantine)
    sink: bool = False  # writes a sink (``targets``: its name), no table of the lakehouse

    @property
    def table(self) -> str:
        """The table the flow fills: what ``--full-refresh`` names to start it over."""
        return self.targets[0]


@dataclass(frozen=True)
class Behind:
    """A table out of step with what ``flow``'s checkpoint recorded of it: behind it
    (``TABLE_BEHIND``), or ahead of it, the checkpoint having gone back
    (``CHECKPOINT_BEHIND_TABLE``)."""

    table: str
    flow: str
    reason: str
    code: str = TABLE_BEHIND


def lakehouse_flows(
    pipeline: Pipeline, lakehouse: Lakehouse, sources: Mapping[str, list[tuple[str, dict]]]
) -> tuple[list[Flow], dict[str, AnyPath]]:
    """The pipeline's streaming flows (a table's own, or each of its append flows, with its own
    checkpoint and query id), and every Delta table they may write or read by name (the
    lakehouse's, and the Delta sources the flows name by path, by that path)."""
    flows = [
        Flow(
            name,
            lakehouse.checkpoint_path(name),
            tuple(filter(None, (d.name, d.quarantine))),
            sink=d.kind == "sink",
        )
        for d in pipeline.datasets.values()
        if d.kind in ("table", "sink")
        for name in pipeline.flow_names(d)
    ]
    tables = {n: lakehouse.table_path(n) for n in lakehouse.table_names()}
    tables |= {t: lakehouse.table_path(t) for f in flows if not f.sink for t in f.targets}
    for fmt, options in (s for found in sources.values() for s in found):
        path = {k.lower(): v for k, v in options.items()}.get("path")
        if DELTA.serves(fmt) and path:
            tables.setdefault(path, as_path(path))
    return flows, tables


def delta_offsets(checkpoint: AnyPath) -> list[dict]:
    """The Delta source offsets of the newest planned batch: where a restart resumes from.

    Spark's offset log file is ``v1``, a metadata line, then one line per source (``-`` for
    none); a Delta source's line names its table by ``reservoirId``.
    """
    planned = offset_log.batch_ids(checkpoint / "offsets")
    if not planned:
        return []
    found = []
    for line in (checkpoint / "offsets" / str(max(planned))).read_text().splitlines()[2:]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and {"reservoirId", "reservoirVersion"} <= data.keys():
            found.append(data)
    return found


def tables_behind(
    flows: Iterable[Flow], tables: Mapping[str, AnyPath], skip: Iterable[str] = ()
) -> list[Behind]:
    """Every table behind a checkpoint of ``flows`` (other than ``skip``'s).

    ``tables`` maps the name of every Delta table a flow may write or read to its path;
    ``skip`` names tables whose flows start over anyway.
    """
    ids = _table_ids(tables)
    skipped = set(skip)
    found: list[Behind] = []
    for flow in flows:
        if flow.table not in skipped:
            found += _targets_behind(flow, tables)
            found += _sources_behind(flow, tables, ids)
    return found


def _targets_behind(flow: Flow, tables: Mapping[str, AnyPath]) -> list[Behind]:
    if flow.sink:  # what a sink holds is the sink's own business (its txn, commit table)
        return []
    last = last_committed_batch(flow.checkpoint)
    app_id = offset_log.query_id(flow.checkpoint)
    if last is None or app_id is None:
        return []
    found = []
    for index, name in enumerate(flow.targets):
        path = str(tables[name])
        latest = log.latest_version(path)
        if latest is None:
            if index > 0:
                continue  # a quarantine table comes with the first batch that has a drop rule
            found.append(
                Behind(
                    name,
                    flow.name,
                    f"table {name!r} is gone (no Delta log at {path}), but the checkpoint of "
                    f"flow {flow.name!r} committed batch {last} to it",
                )
            )
            continue

        done = log.rs_table(path).transaction_version(app_id)
        if done is not None and done > last + 1:  # only the batch after ``last`` may be ahead
            found.append(_checkpoint_behind(flow, name, path, app_id, last, done))
            continue
        if done is not None and done >= last:
            continue
        holds = f"batches up to {done}" if done is not None else "no batch"
        found.append(
            Behind(
                name,
                flow.name,
                f"table {name!r} is at version {latest} and holds {holds} of flow "
                f"{flow.name!r}, whose checkpoint committed batch {last}: the table's log went "
                "back (a restored backup, a lost or deleted log file)",
            )
        )
    return found


def _checkpoint_behind(
    flow: Flow, name: str, path: str, app_id: str, last: int, done: int
) -> Behind:
    """The table holds batches the checkpoint has not committed, beyond a replay's one: their
    numbers would be planned again over other offsets and skipped as already written."""
    version = replay.matching_version(path, app_id, last + 1)
    matching = (
        f" (table version {version} goes with the checkpoint)"
        if version is not None and version >= 0
        else ""
    )
    return Behind(
        name,
        flow.name,
        f"the checkpoint of flow {flow.name!r} committed batches up to {last}, but table "
        f"{name!r} holds batches up to {done} of it{matching}: the checkpoint went back (put "
        "back from an older backup, its last batches deleted), and its next batches would be "
        "skipped as already written",
        code=replay.BEHIND,
    )


def _sources_behind(
    flow: Flow, tables: Mapping[str, AnyPath], ids: Mapping[str, str]
) -> list[Behind]:
    found = []
    for data in delta_offsets(flow.checkpoint):
        name = ids.get(str(data["reservoirId"]))
        if name is None:
            continue  # a table lakefeed does not know: Spark's source checks stay
        needed = DeltaOffset.from_dict(data).needed_version
        latest = log.latest_version(str(tables[name]))
        if latest is not None and needed <= latest:
            continue
        found.append(
            Behind(
                name,
                flow.name,
                f"flow {flow.name!r} has read table {name!r} up to version {needed}, but the "
                f"table is at version {latest}: its log went back, and the flow would skip the "
                "rows committed again under those version numbers",
            )
        )
    return found


def _table_ids(tables: Mapping[str, AnyPath]) -> dict[str, str]:
    """Table id (Delta's ``metaData.id``, an offset's ``reservoirId``) to table name."""

    ids = {}
    for name, path in tables.items():
        if log.latest_version(str(path)) is not None:
            ids[str(log.rs_table(str(path)).metadata().id)] = name
    return ids


def refresh_closure(
    flows: Iterable[Flow], tables: Mapping[str, AnyPath], names: Iterable[str]
) -> list[str]:
    """Tables ``names`` and, transitively, the table of every flow whose checkpoint has read
    a table they reset (a table filled by append flows is reset with all of them).

    Such a flow's offsets point past what the rebuilt table will hold: kept, it would skip rows.
    """
    flows = list(flows)
    ids = _table_ids(tables)
    reads = {
        f.name: {ids.get(str(o["reservoirId"])) for o in delta_offsets(f.checkpoint)} for f in flows
    }
    targets = {f.table: set(f.targets) for f in flows}
    chosen = list(dict.fromkeys(names))
    grew = True
    while grew:
        reset = set().union(*(targets.get(n, {n}) for n in chosen))
        more = [f.table for f in flows if f.table not in chosen and reads[f.name] & reset]
        more = list(dict.fromkeys(more))
        chosen += more
        grew = bool(more)
    return chosen


def check_versions(
    flows: Iterable[Flow], tables: Mapping[str, AnyPath], refresh: Iterable[str]
) -> None:
    """Refuse a run that would lose rows, before anything starts (see the module docstring).

    ``refresh`` names the tables this run resets (``--full-refresh``): their own checkpoints go,
    but a flow that has read them must go with them.
    """
    flows = list(flows)
    refresh = list(refresh)
    behind = tables_behind(flows, tables, skip=refresh)
    ahead = [b for b in behind if b.code == replay.BEHIND]
    owner = {f.name: f.table for f in flows}
    if ahead:
        needed = refresh_closure(flows, tables, [owner[b.flow] for b in ahead])
        raise DataLossRiskError(
            "; ".join(b.reason for b in ahead),
            fix="restore the checkpoint and the table together from the same backup, or the "
            "table to the version that goes with the checkpoint (RESTORE TABLE ... TO VERSION "
            f"AS OF n); or rebuild: `lakefeed run PIPELINE --full-refresh {','.join(needed)}`",
            code=replay.BEHIND,
        )
    if behind:
        named = list(dict.fromkeys([*refresh, *(owner[b.flow] for b in behind)]))
        needed = refresh_closure(flows, tables, named)
        raise DataLossRiskError(
            "; ".join(dict.fromkeys(b.reason for b in behind)),
            fix=_refresh_fix(needed, named),
            code=TABLE_BEHIND,
        )
    needed = refresh_closure(flows, tables, refresh)
    readers = [n for n in needed if n not in refresh]
    if readers:
        raise DataLossRiskError(
            f"--full-refresh {','.join(refresh)} resets tables that flow(s) {', '.join(readers)} "
            "have read: their checkpoints point past what the rebuilt tables will hold, and they "
            "would skip those rows",
            fix=f"reset them too: `lakefeed run PIPELINE --full-refresh {','.join(needed)}`",
            code=SOURCE_RESET,
        )


def _refresh_fix(needed: list[str], named: list[str]) -> str:
    """What to do, keeping whatever is fine first: put back what the table lost (its log files,
    or the table and its checkpoints from one backup), then, only if that cannot be had, the
    ``--full-refresh`` of ``needed``, saying which flows go only because they read past the
    others (``named``: the asked and the behind ones) and that a rebuild keeps only what the
    sources still hold."""
    downstream = [n for n in needed if n not in named]
    also = (
        f" ({', '.join(downstream)} read past what the rebuilt tables will hold, so they go too)"
        if downstream
        else ""
    )
    return (
        "restore the table's missing log files, or restore the table together with the "
        "flow's checkpoint (checkpoints/<flow>) from the same backup, and run again; only if "
        "neither can be had, rebuild the affected tables from their sources (rows the sources "
        f"no longer hold are lost){also}: `lakefeed run PIPELINE --full-refresh "
        f"{','.join(needed)}`"
    )


# --- tables filled by several flows ------------------------------------------------------------

FLOWS_FILE = "_lakefeed_flows.json"  # in the table folder (Delta ignores ``_`` files)


def flows_started(table: AnyPath) -> list[str]:
    """The append flows that have started writing ``table`` (gone with the table)."""
    path = table / FLOWS_FILE
    return list(json.loads(path.read_text())) if path.is_file() else []


def forget_flows(table: AnyPath, flows: Iterable[str]) -> None:
    """``flows`` start over on purpose (a full refresh of the sink they fill)."""
    started = flows_started(table)
    kept = [f for f in started if f not in set(flows)]
    if kept != started:
        write_bytes(str(table / FLOWS_FILE), json.dumps(kept).encode())


def record_flow(table: AnyPath, flow: str) -> None:
    """Remember that ``flow`` writes ``table``: its checkpoint missing later is a loss, not a
    new flow starting from its source's beginning."""
    started = flows_started(table)
    if flow not in started:
        write_bytes(str(table / FLOWS_FILE), json.dumps([*started, flow]).encode())
