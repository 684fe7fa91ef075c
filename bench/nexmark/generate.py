"""Nexmark events as a bronze Delta table (input preparation, not timed).

Schema and proportions follow nexmark/nexmark (``queries/ddl_gen.sql``, ``ddl_views.sql``,
README "Workloads"): one stream of person (2%), auction (6%) and bid (92%) events, as in its
default ``person.proportion=1, auction.proportion=3, bid.proportion=46``; a bid has ``auction,
bidder, price, channel, url, dateTime, extra``. The nested ROWs are flattened into prefixed
columns (``bid_*``, ``person_*``, ``auction_*``) since a Delta table is the source here. The
value distributions are simpler than the Java generator's (uniform ids over the auctions and
people created so far, Nexmark's log-uniform price), which the queries measured here (q0, q1,
q2, q5, q7) do not depend on for their cost.

Spark-free (numpy/pyarrow + delta-rs), so the expected row counts of q0/q1/q2 come from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

PERSON, AUCTION, BID = 0, 1, 2
PROPORTION = 50  # per 50 events: 1 person, 3 auctions, 46 bids
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond")

SCHEMA = pa.schema(
    [
        ("event_type", pa.int32()),
        ("dateTime", pa.timestamp("us", tz="UTC")),
        ("bid_auction", pa.int64()),
        ("bid_bidder", pa.int64()),
        ("bid_price", pa.int64()),
        ("bid_channel", pa.string()),
        ("bid_url", pa.string()),
        ("bid_extra", pa.string()),
        ("person_id", pa.int64()),
        ("person_name", pa.string()),
        ("person_city", pa.string()),
        ("person_state", pa.string()),
        ("auction_id", pa.int64()),
        ("auction_seller", pa.int64()),
        ("auction_category", pa.int64()),
        ("auction_initial_bid", pa.int64()),
        ("auction_expires", pa.timestamp("us", tz="UTC")),
    ]
)


@dataclass(frozen=True)
class NexmarkSpec:
    events: int
    rate: int = 100_000  # events per second of event time
    start_ms: int = 1_700_000_000_000
    seed: int = 11


def kinds(index: np.ndarray) -> np.ndarray:
    """Event type by position: the first of every 50 is a person, the next 3 auctions."""
    slot = index % PROPORTION
    return np.where(slot < 1, PERSON, np.where(slot < 4, AUCTION, BID)).astype(np.int32)


def batch(spec: NexmarkSpec, start: int, n: int) -> pa.RecordBatch:
    """Events ``start .. start+n`` (seeded by ``start``: generate with fixed chunk bounds)."""
    rng = np.random.default_rng([spec.seed, start])
    index = np.arange(start, start + n, dtype=np.int64)
    kind = kinds(index)
    millis = spec.start_ms + index * 1000 // spec.rate
    people = np.maximum(1, (index // PROPORTION) + 1)
    auctions = np.maximum(1, (index // PROPORTION) * 3 + 1)
    is_bid, is_person, is_auction = kind == BID, kind == PERSON, kind == AUCTION
    price = np.round(10 ** (rng.random(n) * 6) * 100).astype(np.int64)
    bid_auction = FIRST_AUCTION_ID + (rng.random(n) * auctions).astype(np.int64)
    bidder = FIRST_PERSON_ID + (rng.random(n) * people).astype(np.int64)
    ts = pa.array(millis * 1000, pa.timestamp("us", tz="UTC"))
    channel = pa.array(CHANNELS).take(pa.array(rng.integers(0, len(CHANNELS), n)))
    url = pc.binary_join_element_wise(
        "https://www.nexmark.com/", channel, "/item.htm?query=1&channel_id=", _str(index % 997), ""
    )
    extra = pa.repeat(pa.scalar("x" * 40), n)
    person_index = index // PROPORTION
    auction_index = index // PROPORTION * 3 + (index % PROPORTION) - 1
    columns = {
        "event_type": pa.array(kind),
        "dateTime": ts,
        "bid_auction": _masked(bid_auction, is_bid),
        "bid_bidder": _masked(bidder, is_bid),
        "bid_price": _masked(price, is_bid),
        "bid_channel": _where(channel, is_bid),
        "bid_url": _where(url, is_bid),
        "bid_extra": _where(extra, is_bid),
        "person_id": _masked(FIRST_PERSON_ID + person_index, is_person),
        "person_name": _where(
            pc.binary_join_element_wise("person-", _str(person_index), ""), is_person
        ),  # fmt: skip
        "person_city": _where(pa.array(CITIES).take(pa.array(index % len(CITIES))), is_person),
        "person_state": _where(pa.array(STATES).take(pa.array(index % len(STATES))), is_person),
        "auction_id": _masked(FIRST_AUCTION_ID + auction_index, is_auction),
        "auction_seller": _masked(bidder, is_auction),
        "auction_category": _masked(10 + index % 5, is_auction),
        "auction_initial_bid": _masked(price, is_auction),
        "auction_expires": _where(
            pa.array((millis + 10_000) * 1000, pa.timestamp("us", tz="UTC")), is_auction
        ),  # fmt: skip
    }
    return pa.RecordBatch.from_pydict(columns, schema=SCHEMA)


def _str(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _masked(values: np.ndarray, keep: np.ndarray) -> pa.Array:
    return pa.array(values, mask=~keep)


def _where(values: pa.Array, keep: np.ndarray) -> pa.Array:
    return pc.if_else(pa.array(keep), values, pa.scalar(None, values.type))


def chunks(spec: NexmarkSpec, files: int) -> list[tuple[int, int]]:
    """(start, count) of each data file; generation is seeded per chunk, so reuse these."""
    per_file = -(-spec.events // files)
    return [(s, min(per_file, spec.events - s)) for s in range(0, spec.events, per_file)]


def write_bronze(spec: NexmarkSpec, path: Path, files: int) -> None:
    """The events as a Delta table of ``files`` commits, one data file each, in time order."""
    from deltalake import write_deltalake

    for start, n in chunks(spec, files):
        write_deltalake(str(path), pa.Table.from_batches([batch(spec, start, n)]), mode="append")


def expected_rows(spec: NexmarkSpec, files: int) -> dict[str, int]:
    """Rows q0, q1 and q2 must output (q5/q7 depend on windows; they are checked for output)."""
    bids = q2 = 0
    for start, n in chunks(spec, files):
        b = batch(spec, start, n)
        is_bid = b.column("event_type").to_numpy() == BID
        auction = b.column("bid_auction").to_numpy(zero_copy_only=False)[is_bid].astype(np.int64)
        bids += int(is_bid.sum())
        q2 += int((auction % 123 == 0).sum())
    return {"q0": bids, "q1": bids, "q2": q2}
