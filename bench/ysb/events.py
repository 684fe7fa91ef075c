"""Yahoo Streaming Benchmark input, generated once and shared by every implementation.

The event shape follows yahoo/streaming-benchmarks ``data/src/setup/core.clj``
(``make-kafka-event-at``): JSON objects with string fields ``user_id, page_id, ad_id, ad_type,
event_type, event_time (epoch milliseconds as a string), ip_address``; 100 campaigns × 10 ads;
event types ``view|click|purchase`` and ad types ``banner|modal|sponsored-search|mail|mobile``
drawn uniformly. Event time advances by a fixed rate so a run covers whole 10-second windows.

This module is pure numpy/pyarrow (no Spark, no Flink) because the *reference* window counts it
computes are what the three implementations are checked against.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NUM_CAMPAIGNS = 100
ADS_PER_CAMPAIGN = 10
WINDOW_MS = 10_000
AD_TYPES = ("banner", "modal", "sponsored-search", "mail", "mobile")
EVENT_TYPES = ("view", "click", "purchase")
# yahoo's generator draws user and page ids from 100 random UUIDs each (``run`` mode).
ID_POOL = 100
BLOCK = 1 << 16

WindowCounts = dict[tuple[str, int], int]


@dataclass(frozen=True)
class Campaigns:
    """The ad → campaign mapping (yahoo keeps it in Redis; here it is a small static table)."""

    ads: list[str]
    campaign_of_ad: list[str]

    @classmethod
    def generate(cls, seed: int) -> Campaigns:
        rng = np.random.default_rng(seed)
        campaigns = [_uuid(rng) for _ in range(NUM_CAMPAIGNS)]
        ads = [_uuid(rng) for _ in range(NUM_CAMPAIGNS * ADS_PER_CAMPAIGN)]
        return cls(ads, [campaigns[i // ADS_PER_CAMPAIGN] for i in range(len(ads))])

    def table(self) -> pa.Table:
        return pa.table({"ad_id": self.ads, "campaign_id": self.campaign_of_ad})

    def write_json(self, path: Path) -> None:
        """One JSON object per line (``ad_id``, ``campaign_id``): every engine can read it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = self.table().to_pylist()
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    @classmethod
    def read_json(cls, path: Path) -> Campaigns:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        return cls([r["ad_id"] for r in rows], [r["campaign_id"] for r in rows])


@dataclass(frozen=True)
class EventSpec:
    """What to generate: ``events`` in total, ``rate`` events per second of event time."""

    events: int
    rate: int = 100_000
    start_ms: int = 1_700_000_000_000
    seed: int = 7


def _uuid(rng: np.random.Generator) -> str:
    return str(uuid.UUID(bytes=rng.bytes(16), version=4))


class Generator:
    """Deterministic event batches; ``batches`` and ``reference_counts`` see the same events."""

    def __init__(self, spec: EventSpec, campaigns: Campaigns) -> None:
        self.spec = spec
        self.campaigns = campaigns
        rng = np.random.default_rng(spec.seed)
        self._users = pa.array([_uuid(rng) for _ in range(ID_POOL)])
        self._pages = pa.array([_uuid(rng) for _ in range(ID_POOL)])
        self._ads = pa.array(campaigns.ads)
        self._ad_types = pa.array(AD_TYPES)
        self._event_types = pa.array(EVENT_TYPES)

    def columns(self, start: int, n: int) -> dict[str, np.ndarray]:
        """Index columns of events ``start .. start+n``.

        Drawn in fixed blocks seeded by block number, so any slicing sees the same events.
        """
        first, last = start // BLOCK, (start + n - 1) // BLOCK
        blocks = [self._block(b) for b in range(first, last + 1)]
        cut = start - first * BLOCK
        columns = {k: np.concatenate([b[k] for b in blocks])[cut : cut + n] for k in blocks[0]}
        index = np.arange(start, start + n, dtype=np.int64)
        columns["event_time"] = self.spec.start_ms + index * 1000 // self.spec.rate
        return columns

    def _block(self, number: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng([self.spec.seed, number])
        return {
            "user": rng.integers(0, ID_POOL, BLOCK),
            "page": rng.integers(0, ID_POOL, BLOCK),
            "ad": rng.integers(0, len(self.campaigns.ads), BLOCK),
            "ad_type": rng.integers(0, len(AD_TYPES), BLOCK),
            "event_type": rng.integers(0, len(EVENT_TYPES), BLOCK),
        }

    def json_lines(self, start: int, n: int) -> pa.StringArray:
        """Events as yahoo's JSON strings (one array element per event, no newline)."""
        c = self.columns(start, n)
        parts = [
            '{"user_id": "',
            self._users.take(c["user"]),
            '", "page_id": "',
            self._pages.take(c["page"]),
            '", "ad_id": "',
            self._ads.take(c["ad"]),
            '", "ad_type": "',
            self._ad_types.take(c["ad_type"]),
            '", "event_type": "',
            self._event_types.take(c["event_type"]),
            '", "event_time": "',
            pc.cast(pa.array(c["event_time"]), pa.string()),
            '", "ip_address": "1.2.3.4"}',
        ]
        return pc.binary_join_element_wise(*parts, "")

    def chunks(self, chunk: int) -> Iterator[tuple[int, int]]:
        for start in range(0, self.spec.events, chunk):
            yield start, min(chunk, self.spec.events - start)

    def reference_counts(self, chunk: int = 1_000_000) -> WindowCounts:
        """Views per (campaign, 10 s window start in ms): the answer every engine must give."""
        campaign_idx = np.arange(len(self.campaigns.ads)) // ADS_PER_CAMPAIGN
        totals = np.zeros((NUM_CAMPAIGNS, 0), dtype=np.int64)
        first_window = self.spec.start_ms // WINDOW_MS
        for start, n in self.chunks(chunk):
            c = self.columns(start, n)
            views = c["event_type"] == EVENT_TYPES.index("view")
            window = c["event_time"][views] // WINDOW_MS - first_window
            width = int(window.max()) + 1 if window.size else 0
            if width > totals.shape[1]:
                totals = np.pad(totals, ((0, 0), (0, width - totals.shape[1])))
            np.add.at(totals, (campaign_idx[c["ad"][views]], window), 1)
        campaign_ids = self.campaigns.campaign_of_ad[::ADS_PER_CAMPAIGN]
        return {
            (campaign_ids[ci], int((first_window + w) * WINDOW_MS)): int(totals[ci, w])
            for ci, w in zip(*np.nonzero(totals), strict=True)
        }

    def max_event_time_ms(self) -> int:
        return self.spec.start_ms + (self.spec.events - 1) * 1000 // self.spec.rate


def newline_bytes(lines: pa.StringArray) -> bytes:
    """The array's characters as one newline-delimited blob, without a Python loop."""
    joined = pc.binary_join_element_wise(lines, "\n", "")
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset :]
    data = joined.buffers()[2]
    return data.to_pybytes()[offsets[0] : offsets[len(joined)]]


def write_json_files(gen: Generator, folder: Path, files: int) -> list[Path]:
    """Split the events over ``files`` newline-delimited JSON files named in event-time order.

    Modification times also increase with the name, so a source that orders by either sees
    the events in event-time order.
    """
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-gen.spec.events // files)
    paths = []
    for i, (start, n) in enumerate(gen.chunks(per_file)):
        path = folder / f"events-{i:05d}.json"
        path.write_bytes(newline_bytes(gen.json_lines(start, n)))
        os.utime(path, ns=(path.stat().st_mtime_ns, 1_700_000_000_000_000_000 + i * 10**9))
        paths.append(path)
    return paths


def counts_from_table(table: pa.Table) -> WindowCounts:
    """Normalise an engine's output (campaign_id, window_start, count) to ``WindowCounts``.

    ``window_start`` may be a timestamp of any unit or epoch milliseconds.
    """
    start = table.column("window_start")
    if pa.types.is_timestamp(start.type):
        start = pc.cast(pc.cast(start, pa.timestamp("ms", tz="UTC")), pa.int64())
    counts = pc.cast(table.column("count"), pa.int64())
    return {
        (c, int(s)): int(n)
        for c, s, n in zip(
            table.column("campaign_id").to_pylist(),
            start.to_pylist(),
            counts.to_pylist(),
            strict=True,
        )
    }


def compare(expected: WindowCounts, got: WindowCounts, closed_before_ms: int | None) -> list[str]:
    """Differences between ``got`` and the reference, as readable lines (empty = equal).

    ``closed_before_ms``: a stream that stops has not closed windows ending after its final
    watermark (Spark append mode); only windows ending at or before it are required then.
    """
    want = {
        k: v
        for k, v in expected.items()
        if closed_before_ms is None or k[1] + WINDOW_MS <= closed_before_ms
    }
    problems = [f"missing window {k}: expected {v}" for k, v in want.items() if k not in got]
    wrong = {k: v for k, v in got.items() if k in want and want[k] != v}
    problems += [f"window {k}: expected {want[k]}, got {v}" for k, v in wrong.items()]
    problems += [f"unexpected window {k} = {v}" for k, v in got.items() if k not in expected]
    return problems
