"""Debezium-style change events of a small shop database, sent to Kafka.

The script plays a PostgreSQL database captured by Debezium: tables ``customers`` and
``orders``, one topic each (``shop.public.customers``, ``shop.public.orders``), each message
keyed by the row's primary key (``{"customer_id": 3}``) with Debezium's JSON envelope as value::

    {"before": {...} | null, "after": {...} | null, "op": "r" | "c" | "u" | "d",
     "source": {"connector": "postgresql", "table": "customers", "lsn": 1234, "ts_ms": ...},
     "ts_ms": ...}

``r`` rows come from the initial snapshot, then creates, updates and deletes, a customer
deleted and created again under the same id, and after each delete a tombstone (a null
value, as Debezium sends for log compaction). Delivery is at-least-once and not in commit
order: some events are sent twice (a connector restart re-sends them) and some neighbours
swap places, which is what the pipeline's ``sequence_by`` (the LSN) has to put right.
The same ``--seed`` always gives the same events (sending them again changes nothing
downstream); ``--rounds`` sends more business every ``--interval`` seconds, for a continuous
run to pick up::

    python examples/cdc/produce.py -b 127.0.0.1:9092 --seed 7 [--rounds 5 --interval 10]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

TOPICS = {"customers": "shop.public.customers", "orders": "shop.public.orders"}
KEYS = {"customers": "customer_id", "orders": "order_id"}
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
COUNTRIES = ("DE", "FR", "NL", "PL", "SE", "US")
STATUSES = ("placed", "paid", "shipped", "cancelled")
Row = dict[str, Any]


@dataclass(frozen=True)
class Event:
    """One Kafka message: the changed row's key and its envelope (None: a tombstone)."""

    table: str
    key: Row
    value: Row | None

    @property
    def topic(self) -> str:
        return TOPICS[self.table]

    @property
    def lsn(self) -> int | None:
        return None if self.value is None else self.value["source"]["lsn"]

    def message(self) -> tuple[str, str | None]:
        """Key and value as Kafka carries them (JSON text)."""
        value = None if self.value is None else json.dumps(self.value, sort_keys=True)
        return json.dumps(self.key), value


@dataclass
class Shop:
    """The captured database: its rows, and the log position of the next commit."""

    rng: random.Random
    rows: dict[str, dict[int, Row]] = field(default_factory=lambda: {t: {} for t in TOPICS})
    lsn: int = 1_000
    clock_ms: int = START_MS
    log: list[Event] = field(default_factory=list)
    rounds: list[int] = field(default_factory=list)  # the log's length at each round's end

    def commit(self, table: str, op: str, key: int, after: Row | None) -> None:
        """Apply one change and log its event (and a tombstone after a delete)."""
        before = self.rows[table].get(key)
        self.lsn += 8 * self.rng.randint(1, 4)
        self.clock_ms += self.rng.randint(200, 3_000)
        if after is None:
            del self.rows[table][key]
        else:
            self.rows[table][key] = after
        source = {"connector": "postgresql", "name": "shop", "db": "shop", "schema": "public"}
        source |= {"table": table, "lsn": self.lsn, "ts_ms": self.clock_ms}
        source["snapshot"] = "true" if op == "r" else "false"
        envelope = {"before": before, "after": after, "op": op, "source": source}
        envelope["ts_ms"] = self.clock_ms + self.rng.randint(5, 50)  # when Debezium saw it
        self.log.append(Event(table, {KEYS[table]: key}, envelope))
        if op == "d":
            self.log.append(Event(table, {KEYS[table]: key}, None))

    def live(self, table: str) -> list[int]:
        return sorted(self.rows[table])


def _customer(rng: random.Random, key: int) -> Row:
    return {
        "customer_id": key,
        "name": f"customer {key}",
        "email": f"c{key}.{rng.randrange(1000)}@example.com",
        "country": rng.choice(COUNTRIES),
    }


def _changed_customer(rng: random.Random, row: Row) -> Row:
    """The row with one field changed to a different value."""
    what = rng.choice(("email", "country"))
    if what == "email":
        return {**row, "email": f"c{row['customer_id']}.{rng.randrange(1000, 2000)}@example.com"}
    return {**row, "country": rng.choice([c for c in COUNTRIES if c != row["country"]])}


def _order(rng: random.Random, key: int, customer: int) -> Row:
    amount = round(rng.uniform(5, 400), 2)
    return {"order_id": key, "customer_id": customer, "amount": amount, "status": "placed"}


def _step(shop: Shop, rng: random.Random, next_ids: dict[str, int], deleted: list[int]) -> None:
    """One random commit of the shop's business."""
    customers, orders = shop.live("customers"), shop.live("orders")
    roll = rng.random()
    if roll < 0.15 or not customers:
        key = next_ids["customers"] = next_ids["customers"] + 1
        shop.commit("customers", "c", key, _customer(rng, key))
    elif roll < 0.55:
        key = next_ids["orders"] = next_ids["orders"] + 1
        shop.commit("orders", "c", key, _order(rng, key, rng.choice(customers)))
    elif roll < 0.75:
        key = rng.choice(customers)
        shop.commit("customers", "u", key, _changed_customer(rng, shop.rows["customers"][key]))
    elif roll < 0.88 and orders:
        key = rng.choice(orders)
        status = rng.choice([s for s in STATUSES if s != shop.rows["orders"][key]["status"]])
        shop.commit("orders", "u", key, {**shop.rows["orders"][key], "status": status})
    elif roll < 0.94 and len(customers) > 3:
        key = rng.choice(customers)
        shop.commit("customers", "d", key, None)
        deleted.append(key)
    elif deleted:  # the same id signs up again
        key = deleted.pop(0)
        shop.commit("customers", "c", key, _customer(rng, key))


def simulate(seed: int = 7, customers: int = 12, orders: int = 30, rounds: int = 1) -> Shop:
    """The shop's changes in commit order (``shop.log``) and its final rows (``shop.rows``):
    an initial snapshot of ``customers`` rows, then ``rounds`` rounds of business, each until
    ``orders`` more orders exist (``shop.rounds``: where each round ends in the log), the last
    ending with customer 1 deleted and created again."""
    rng = random.Random(seed)
    shop = Shop(rng)
    for key in range(1, customers + 1):
        shop.commit("customers", "r", key, _customer(rng, key))
    next_ids, deleted = {"customers": customers, "orders": 0}, []
    for round_ in range(1, rounds + 1):
        while next_ids["orders"] < orders * round_:
            _step(shop, rng, next_ids, deleted)
        shop.rounds.append(len(shop.log))
    if 1 in shop.rows["customers"]:
        shop.commit("customers", "d", 1, None)
    shop.commit("customers", "c", 1, _customer(rng, 1))
    shop.rounds[-1] = len(shop.log)
    return shop


def delivered(
    log: list[Event], seed: int = 7, duplicates: float = 0.05, swaps: float = 0.05
) -> list[Event]:
    """The order Kafka receives ``log`` in: some events twice, some neighbours swapped."""
    rng = random.Random(seed + 1)
    sent: list[Event] = []
    for event in log:
        sent.append(event)
        if rng.random() < duplicates:
            sent.append(event)
    for i in range(len(sent) - 1):
        if rng.random() < swaps:
            sent[i], sent[i + 1] = sent[i + 1], sent[i]
    return sent


def send(events: list[Event], bootstrap: str, partitions: int = 1) -> int:
    """Produce ``events`` in order (creating the topics); the number acknowledged."""
    from confluent_kafka import Producer

    from lakefeed.connectors.kafka.feed import ensure_topic, wait_ready

    client = {"bootstrap.servers": bootstrap}
    wait_ready(client, timeout=5)
    for topic in TOPICS.values():
        ensure_topic(client, topic, partitions, timeout=10)
    errors: list[str] = []
    producer = Producer({**client, "enable.idempotence": True})
    for event in events:
        key, value = event.message()
        stamp = event.value["ts_ms"] if event.value else None
        producer.produce(
            event.topic,
            key=key,
            value=value,
            timestamp=stamp or 0,
            on_delivery=lambda error, _m: errors.append(str(error)) if error else None,
        )
        producer.poll(0)
    remaining = producer.flush(30)
    if errors or remaining:
        raise SystemExit(f"{remaining} unacknowledged; first error: {errors[:1]}")
    return len(events)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-b", "--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--seed", type=int, default=7, help="same seed, same events")
    parser.add_argument("--customers", type=int, default=12, help="rows of the initial snapshot")
    parser.add_argument("--orders", type=int, default=30, help="orders created per round")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of business to send")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between rounds")
    parser.add_argument("--partitions", type=int, default=1, help="partitions per new topic")
    parser.add_argument("--print", action="store_true", help="print the messages, send nothing")
    args = parser.parse_args()
    shop = simulate(args.seed, args.customers, args.orders, args.rounds)
    start = 0
    for number, end in enumerate(shop.rounds, 1):
        events = delivered(shop.log[start:end], args.seed + number)
        start = end
        if args.print:
            for event in events:
                print(event.topic, *event.message())
            continue
        if number > 1:
            time.sleep(args.interval)
        sent = send(events, args.bootstrap_servers, args.partitions)
        print(f"round {number}: {sent} change events sent to {', '.join(TOPICS.values())}")


if __name__ == "__main__":
    main()
