"""What a flow keeps in Spark state: operators, stores, key counts, bytes, sample rows, TTL.

Spark writes stateful operators' state (aggregations, session windows, dedup, joins,
transformWithState) under the flow's checkpoint. Spark's own state data sources read it back:
``state-metadata`` lists the operators and their stores, ``statestore`` reads one store's keys
and values as of a batch. This module runs both on a lakehouse's checkpoint, so ``lakefeed
state FLOW`` shows what a stateful flow holds without the user knowing the layout.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from lakefeed.core.errors import CheckpointError
from lakefeed.core.lakehouse import Lakehouse
from lakefeed.core.redact import redact
from lakefeed.core.storage import AnyPath, total_size
from lakefeed.runtime.errors import UNKNOWN_FLOW
from lakefeed.runtime.event_log import read_events

if TYPE_CHECKING:  # the CLI imports this module; Spark loads only when a state is read
    from pyspark.sql import Row, SparkSession

TIMER = "TimerState"  # Spark's stateVariableType of a transformWithState operator's timers
TIMERS = "timers"  # the store name shown for those timers


@dataclass
class StoreState:
    """One state store of an operator as of the operator's last committed batch."""

    name: str
    keys: int | None
    sample: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None  # why the store could not be read (e.g. an unsupported format)


@dataclass
class OperatorState:
    """One stateful operator of a flow, as ``state-metadata`` describes it."""

    operator_id: int
    name: str
    partitions: int
    min_batch: int
    max_batch: int
    bytes_on_disk: int
    stores: list[StoreState]
    # From the flow's last progress in the event log (None when it has none).
    memory_used_bytes: int | None = None
    rows_dropped_by_watermark: int | None = None
    ttl: list[dict[str, Any]] = field(default_factory=list)  # transformWithState variables


@dataclass
class FlowState:
    flow: str
    checkpoint: str
    operators: list[OperatorState]

    def to_json(self) -> dict[str, Any]:
        return redact(asdict(self))


def known_flows(lakehouse: Lakehouse) -> list[str]:
    """Flows with a checkpoint in the lakehouse."""
    folder = lakehouse.root / "checkpoints"
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def flow_checkpoint(lakehouse: Lakehouse, flow: str) -> AnyPath:
    """The checkpoint of ``flow``; an unknown flow is an error naming the known ones."""
    checkpoint = lakehouse.checkpoint_path(flow)
    if not checkpoint.is_dir():
        known = ", ".join(known_flows(lakehouse)) or "none"
        raise CheckpointError(
            f"flow {flow!r} has no checkpoint in {lakehouse.root} (flows: {known})",
            fix="name one of the flows listed, or run the pipeline first",
            code=UNKNOWN_FLOW,
        )
    return checkpoint


def inspect_state(
    spark: SparkSession, lakehouse: Lakehouse, flow: str, limit: int = 5
) -> FlowState:
    """Read the state of ``flow``: its operators and, per store, key count and ``limit`` rows."""
    checkpoint = flow_checkpoint(lakehouse, flow)
    if not (checkpoint / "state").is_dir():
        return FlowState(flow, str(checkpoint), [])
    rows = spark.read.format("state-metadata").load(str(checkpoint)).collect()
    by_operator: dict[int, list[Row]] = {}
    for row in rows:
        by_operator.setdefault(row["operatorId"], []).append(row)
    operators = [
        _operator(spark, checkpoint, op_rows, limit) for _, op_rows in sorted(by_operator.items())
    ]
    _add_progress(operators, _last_state_progress(lakehouse, flow))
    return FlowState(flow, str(checkpoint), operators)


def _last_state_progress(lakehouse: Lakehouse, flow: str) -> list[dict[str, Any]]:
    """``stateOperators`` of the flow's newest progress event, in Spark's operator order."""
    try:
        events = read_events(
            lakehouse.event_log_path, event_types=["flow_progress"], flow=flow, limit=1
        )
    except (OSError, ValueError):  # no or unreadable event log: state alone is still useful
        return []
    details = events[0].get("details") if events else None
    operators = details.get("stateOperators") if isinstance(details, dict) else None
    return [op for op in operators or [] if isinstance(op, dict)]


def _add_progress(operators: list[OperatorState], progress: list[dict[str, Any]]) -> None:
    """Match progress entries to operators by name, in order (ids are not in the progress)."""
    remaining = list(progress)
    for op in operators:
        match = next((p for p in remaining if p.get("operatorName") == op.name), None)
        if match is not None:
            remaining.remove(match)
            op.memory_used_bytes = _int(match.get("memoryUsedBytes"))
            op.rows_dropped_by_watermark = _int(match.get("numRowsDroppedByWatermark"))


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def _operator(
    spark: SparkSession, checkpoint: AnyPath, rows: list[Row], limit: int
) -> OperatorState:
    first = rows[0]
    op_id = int(first["operatorId"])
    stores = [
        _store(spark, checkpoint, op_id, name, options, int(row["maxBatchId"]), limit)
        for row in rows
        for name, options in _store_reads(row)
    ]
    return OperatorState(
        operator_id=op_id,
        name=first["operatorName"],
        partitions=int(first["numPartitions"]),
        min_batch=int(first["minBatchId"]),
        max_batch=int(first["maxBatchId"]),
        bytes_on_disk=_bytes(checkpoint / "state" / str(op_id)),
        stores=stores,
        ttl=[
            {"variable": v.get("stateName"), "ttl_enabled": v.get("ttlEnabled")}
            for v in _variables(first)
            if v.get("stateVariableType") != TIMER
        ],
    )


def _store_reads(row: Row) -> list[tuple[str, dict[str, str]]]:
    """(name shown, reader options) per store of a metadata row. transformWithState keeps each
    state variable, and the timers, in a column family of one store: Spark's reader wants the
    variable's name (``stateVarName``) or ``readRegisteredTimers``, not the store's."""
    variables = _variables(row)
    if not variables:
        return [(row["stateStoreName"], {"storeName": row["stateStoreName"]})]
    reads = [(TIMERS, {"readRegisteredTimers": "true"})] if _has_timers(variables) else []
    names = [str(v.get("stateName")) for v in variables if v.get("stateVariableType") != TIMER]
    return [(name, {"stateVarName": name}) for name in names] + reads


def _has_timers(variables: list[dict[str, Any]]) -> bool:
    return any(v.get("stateVariableType") == TIMER for v in variables)


def _store(
    spark: SparkSession,
    checkpoint: AnyPath,
    op_id: int,
    name: str,
    options: dict[str, str],
    batch: int,
    limit: int,
) -> StoreState:
    reader = (
        spark.read.format("statestore")
        .option("operatorId", op_id)
        .option("batchId", batch)
        .options(**options)
    )
    try:
        frame = reader.load(str(checkpoint))
        count = frame.count()
        sample = [_plain(r.asDict(recursive=True)) for r in frame.limit(limit).collect()]
    except Exception as error:  # noqa: BLE001 - one unreadable store must not hide the others
        return StoreState(name, None, error=str(error).splitlines()[0])
    return StoreState(name, count, sample)


def _variables(row: Row) -> list[dict[str, Any]]:
    """transformWithState's state variables (name, type, TTL), from the operator's properties."""
    raw = row.asDict().get("operatorProperties")
    if not raw:
        return []
    try:
        props = json.loads(raw)
    except (TypeError, ValueError):
        return []
    variables = props.get("stateVariables", []) if isinstance(props, dict) else []
    return [v for v in variables if isinstance(v, dict)]


def _bytes(folder: AnyPath) -> int:
    return total_size(str(folder))


def _plain(value: Any) -> Any:
    """Rows as JSON-friendly values (timestamps and the like become strings)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
