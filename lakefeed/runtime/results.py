"""What ``lakefeed.run``, ``lakefeed.validate`` and ``lakefeed.verify`` return: frozen records.

They are the public shape of an answer (the runtime's own working state stays private and may
change). ``ValidationResult.to_dict()`` is also what ``lakefeed validate --json`` prints, so its
keys are a contract for orchestrators: add keys, never rename or remove them (``format`` says
which contract a document follows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lakefeed.pipeline.kinds import DatasetKind, RunMode

VALIDATION_FORMAT = 1


@dataclass(frozen=True)
class ConnectionCheck:
    """One outside source of a flow, checked without starting a query."""

    flow: str
    target: str  # what was checked: "kafka 127.0.0.1:9092", "path /landing", ...
    ok: bool
    detail: str


class FlowStatus(StrEnum):
    """How a flow's part of a run ended."""

    COMPLETED = "completed"  # ran to the end of its input (or its refresh finished)
    STOPPED = "stopped"  # the run was stopped (signal, duration) before or while it ran
    FAILED = "failed"  # failed and was not restarted any more


@dataclass(frozen=True)
class FlowResult:
    """One stored dataset of a run: its status and the rows committed to its table in this run."""

    name: str
    kind: DatasetKind
    status: FlowStatus
    output_mode: str | None
    rows_written: int
    error: str | None = None  # the last failure's headline, when the flow failed


@dataclass(frozen=True)
class RunResult:
    """How a run ended: per stored dataset its ``flows`` row; ``errors`` also names the append
    flows and sink flows that failed (they have no table of their own to report on)."""

    run_id: str
    pipeline: str
    mode: RunMode
    reason: str  # "completed", "duration reached", "SIGINT", ...
    flows: tuple[FlowResult, ...] = ()
    warnings: tuple[str, ...] = ()  # from validation, e.g. an aggregate run in complete mode
    #: every failed flow -> why (the runner's own record: the event log may be unwritable)
    errors: Mapping[str, str] = field(default_factory=dict, compare=False)
    #: another run took the lakehouse's lease over, so this one stopped before its end
    lease_lost: bool = False

    @property
    def failed(self) -> list[str]:
        """The failed flows: the stored datasets', then any other flow's (append, sink)."""
        names = [flow.name for flow in self.flows if flow.status is FlowStatus.FAILED]
        return names + [name for name in self.errors if name not in names]

    @property
    def ok(self) -> bool:
        """No flow failed and the run kept its lease: a run stopped by a takeover did not
        finish what it was started for, whatever its flows reported."""
        return not self.failed and not self.lease_lost

    def flow(self, name: str) -> FlowResult:
        return next(flow for flow in self.flows if flow.name == name)


@dataclass(frozen=True)
class SinkInfo:
    """Where a sink writes: its format, a description and its options, secrets masked."""

    format: str
    description: str
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset as declared: what it is and how it is stored (a sink: where it writes)."""

    name: str
    kind: DatasetKind
    source: str  # file:line (Python) or file (SQL) that declares it
    comment: str | None = None
    partition_cols: tuple[str, ...] = ()
    table_properties: dict[str, str] = field(default_factory=dict)
    expectations: tuple[str, ...] = ()  # rule names
    reads: tuple[str, ...] = ()
    sink: SinkInfo | None = None


@dataclass(frozen=True)
class FlowInfo:
    """How a stored dataset would run: its output mode and what its plan holds."""

    name: str
    kind: DatasetKind
    output_mode: str | None  # None when no output mode works (see problems)
    streaming: bool
    aggregate: bool
    watermark: bool
    stateful: tuple[str, ...] = ()


@dataclass(frozen=True)
class Edge:
    """``target`` reads ``source``."""

    source: str
    target: str


@dataclass(frozen=True)
class ValidationResult:
    pipeline: str
    datasets: tuple[DatasetInfo, ...] = ()
    flows: tuple[FlowInfo, ...] = ()
    edges: tuple[Edge, ...] = ()
    order: tuple[str, ...] = ()  # run order; empty when the graph is broken
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    connections: tuple[ConnectionCheck, ...] = ()  # with check_connections=True
    # the exceptions behind problems (for --debug traces); not part of the JSON document
    causes: Mapping[str, BaseException] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``lakefeed validate --json`` (stable keys, see the module)."""
        return {
            "format": VALIDATION_FORMAT,
            "pipeline": self.pipeline,
            "valid": self.ok,
            "datasets": [_dataset_dict(d) for d in self.datasets],
            "flows": [
                {
                    "name": f.name,
                    "kind": f.kind.value,
                    "output_mode": f.output_mode,
                    "streaming": f.streaming,
                    "aggregate": f.aggregate,
                    "watermark": f.watermark,
                    "stateful": list(f.stateful),
                }
                for f in self.flows
            ],
            "edges": [{"from": e.source, "to": e.target} for e in self.edges],
            "order": list(self.order),
            "problems": list(self.problems),
            "warnings": list(self.warnings),
            "connections": [
                {"flow": c.flow, "target": c.target, "ok": c.ok, "detail": c.detail}
                for c in self.connections
            ],
        }


def _dataset_dict(d: DatasetInfo) -> dict[str, Any]:
    """A dataset of ``validate --json``; only a sink has the ``sink`` key (its format and
    options, secrets masked), so the documents of sink-less pipelines keep their keys."""
    doc: dict[str, Any] = {
        "name": d.name,
        "kind": d.kind.value,
        "source": d.source,
        "comment": d.comment,
        "partition_cols": list(d.partition_cols),
        "table_properties": dict(d.table_properties),
        "expectations": list(d.expectations),
        "reads": list(d.reads),
    }
    if (sink := d.sink) is not None:
        doc["sink"] = {
            "format": sink.format,
            "description": sink.description,
            "options": sink.options,
        }
    return doc


@dataclass(frozen=True)
class TableComparison:
    """One table of ``verify``: the streaming result against a batch recompute."""

    table: str
    stream_rows: int
    batch_rows: int
    only_stream: int
    only_batch: int
    pending: int  # rows of windows the stream's watermark has not closed yet
    samples: tuple[str, ...] = ()
    note: str = ""
    inconsistent: str = ""  # why the table cannot be trusted (e.g. its log went back)
    verified: bool = True  # False: no batch side could be computed (``note`` says why)
    #: not compared by design (``note`` says why): its output depends on the wall clock
    excluded: bool = False

    @property
    def equal(self) -> bool:
        return (
            self.verified
            and not self.inconsistent
            and self.only_stream == 0
            and self.only_batch == 0
        )


@dataclass(frozen=True)
class VerifyResult:
    pipeline: str
    tables: tuple[TableComparison, ...] = ()

    @property
    def ok(self) -> bool:
        return all(table.equal or table.excluded for table in self.tables)

    def table(self, name: str) -> TableComparison:
        return next(table for table in self.tables if table.table == name)


class FlowVerdict(StrEnum):
    """What ``lakefeed plan`` says a run of the new code would do with a flow."""

    NEW = "new"  # nothing stored yet: starts from its sources
    KEEP = "keep"
    COMPATIBLE = "compatible change"  # resumes; the change applies from the next batch
    RESET = "needs a checkpoint reset"  # its checkpoint cannot resume, its table is empty
    REFRESH = "needs a full refresh"  # table and checkpoint rebuilt from the sources
    RECOMPUTE = "recomputed"  # a materialized view: recomputed on every run anyway
    ORPHANED = "orphaned"  # stored, but no flow of the pipeline writes it any more


@dataclass(frozen=True)
class FlowChange:
    flow: str
    verdict: FlowVerdict
    reasons: tuple[str, ...]
    reprocessed: str  # what the next run would read again


@dataclass(frozen=True)
class UpgradePlan:
    """``lakefeed plan``: each flow's verdict; ``ok`` is False where ``run`` would refuse."""

    pipeline: str
    flows: tuple[FlowChange, ...] = ()
    problems: tuple[str, ...] = ()  # the pipeline's own (validation) problems

    @property
    def ok(self) -> bool:
        blocking = (FlowVerdict.RESET, FlowVerdict.REFRESH)
        return not self.problems and all(f.verdict not in blocking for f in self.flows)

    def flow(self, name: str) -> FlowChange:
        return next(f for f in self.flows if f.flow == name)

    def refresh(self) -> list[str]:
        """The tables a ``--full-refresh`` must name."""
        return [f.flow for f in self.flows if f.verdict is FlowVerdict.REFRESH]
