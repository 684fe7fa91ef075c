"""Which input a flow's checkpoint committed, as options a batch read of each source can take.

``lakefeed verify`` recomputes a streaming table in batch and compares. That is only fair over
exactly the input the stream committed: the generator rows up to its offset (and its start
time), the Kafka offsets per partition, the files of the cloudFiles log, the upstream Delta
table as of the version the stream finished. Spark's checkpoint says it: ``offsets/N`` holds
the end offsets of batch N and ``commits/N`` exists once batch N is committed
(:mod:`lakefeed.spark.offset_log` reads them).

Reading offsets is connector knowledge, so each connector has a small ``committed_input(options,
end, first_end)`` beside its offsets: batch options that bound the read to what a stream with
``options`` committed up to ``end`` (``first_end``: the first batch's end, where a stream that
started at "latest" began), or None when ``end`` is not its offset. Spark orders a query's
sources by its plan, not by the calls that built it, so each source claims the first unclaimed
offset its connector recognises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lakefeed.connectors import registry
from lakefeed.core.errors import CheckpointError
from lakefeed.core.storage import AnyPath
from lakefeed.spark.offset_log import Batch, last_committed, read_batch


@dataclass
class CommittedInput:
    """The input one flow's checkpoint committed, handed to its sources as they are read."""

    flow: str
    last: Batch
    first: Batch | None
    _claimed: set[int] = field(default_factory=set)

    @classmethod
    def of(cls, flow: str, checkpoint: AnyPath) -> CommittedInput | None:
        last = last_committed(checkpoint)
        if last is None:
            return None
        return cls(flow, last, read_batch(checkpoint, 0))

    def bound(self, fmt: str, options: Mapping[str, str]) -> dict[str, str]:
        """``options`` with the bounds of the committed input of this ``fmt`` source."""
        connector = registry.find(fmt)
        reader = connector.committed_input if connector is not None else None
        if reader is None:
            raise CheckpointError(
                f"flow {self.flow!r} reads format {fmt!r}, whose checkpoint offsets lakefeed "
                "cannot turn into a batch read",
                fix=f"verify works over the {_bounded()} sources",
            )
        for index, end in enumerate(self.last.offsets):
            if index in self._claimed:
                continue
            first = self.first.offsets[index] if self.first is not None else None
            bounds = reader(options, end, first)
            if bounds is not None:
                self._claimed.add(index)
                wanted = {key.lower() for key in bounds}
                kept = {k: v for k, v in options.items() if k.lower() not in wanted}
                return {**kept, **bounds}
        raise CheckpointError(
            f"flow {self.flow!r}: batch {self.last.batch_id} of its checkpoint holds no offset "
            f"of its {fmt} source as defined now (were its options changed?)",
            fix="restore the options the stream ran with, or rebuild with --full-refresh",
        )


def _bounded() -> str:
    """The connectors whose sources ``verify`` can bound to a checkpoint, for a message."""
    return ", ".join(c.name for c in registry.connectors() if c.committed_input is not None)
