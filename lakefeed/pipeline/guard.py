"""The checkpoint guard: a checkpoint knows which flow and target it belongs to.

Streaming exactly-once rests on the pairing (checkpoint, target table). Three mistakes break it
silently in plain Spark, and lakefeed refuses each before the query starts:

- reusing a checkpoint for another flow or target (offsets of one source applied to another);
- a missing checkpoint beside a non-empty target (the stream re-reads its source from the start
  and duplicates everything already in the table);
- a change to a stateful flow that the saved state cannot serve (different keys/aggregates).

The identity lives in ``<checkpoint>/_lakefeed.json``, written before the first batch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

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


class GuardError(Exception):
    """A checkpoint/target pairing that would lose or duplicate data."""


def read_identity(checkpoint: Path) -> Identity | None:
    path = checkpoint / IDENTITY_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return Identity(data["pipeline"], data["flow"], data["target"], list(data.get("stateful", [])))


def write_identity(checkpoint: Path, identity: Identity) -> None:
    checkpoint.mkdir(parents=True, exist_ok=True)
    tmp = checkpoint / (IDENTITY_FILE + ".tmp")
    payload = {**asdict(identity), "fingerprint": identity.fingerprint}
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(checkpoint / IDENTITY_FILE)


def has_progress(checkpoint: Path) -> bool:
    """True once Spark has planned at least one batch in this checkpoint."""
    offsets = checkpoint / "offsets"
    return offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())


def check(
    checkpoint: Path,
    expected: Identity,
    target_has_rows: bool,
    full_refresh: bool = False,
) -> None:
    """Raise :class:`GuardError` naming the flow and the fix when the pairing is unsafe."""
    if full_refresh:
        return
    flow = expected.flow
    refresh = f"lakefeed run PIPELINE --full-refresh {expected.target}"
    found = read_identity(checkpoint)
    if found is None and has_progress(checkpoint):
        raise GuardError(
            f"flow {flow!r}: checkpoint {checkpoint} was not created by lakefeed for this flow; "
            f"move it away, or rebuild the table with `{refresh}`"
        )
    if found is not None and (found.flow, found.target) != (expected.flow, expected.target):
        raise GuardError(
            f"flow {flow!r}: checkpoint {checkpoint} belongs to flow {found.flow!r} writing "
            f"{found.target!r} (pipeline {found.pipeline!r}); reusing it would apply another "
            f"query's offsets here. Give each flow its own checkpoint, or `{refresh}`"
        )
    if not has_progress(checkpoint) and target_has_rows:
        raise GuardError(
            f"flow {flow!r}: target table {expected.target!r} has rows but its checkpoint "
            f"{checkpoint} is missing; the stream would re-read its source from the start and "
            f"duplicate those rows. Restore the checkpoint, or rebuild with `{refresh}`"
        )
    if found is not None and has_progress(checkpoint) and found.stateful != expected.stateful:
        raise GuardError(
            f"flow {flow!r}: its stateful operators changed since the checkpoint was written "
            f"(was {_short(found.stateful)}, now {_short(expected.stateful)}); "
            f"the saved state cannot serve the new query. Revert the change, or rebuild the "
            f"table and its state with `{refresh}`"
        )


def _short(operators: list[str], width: int = 120) -> str:
    if not operators:
        return "stateless"
    return "; ".join(op if len(op) <= width else op[: width - 3] + "..." for op in operators)
