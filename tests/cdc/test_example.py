"""examples/cdc: its producer's events (Spark-free), and the pipeline fed those events as Kafka
records in two batches (no broker), checked against the database the producer simulated."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from lakefeed.testing import PipelineTest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cdc"
CUSTOMER = ("customer_id", "name", "email", "country")


def _produce() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cdc_produce", EXAMPLE / "produce.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


produce = _produce()


def _messages(seed: int) -> list[tuple]:
    shop = produce.simulate(seed)
    return [(e.topic, *e.message()) for e in produce.delivered(shop.log, seed + 1)]


def test_same_seed_same_events() -> None:
    assert _messages(7) == _messages(7)
    assert _messages(7) != _messages(8)


def test_events_have_every_kind_of_trouble() -> None:
    shop = produce.simulate(7)
    sent = produce.delivered(shop.log, 8)
    ops = {e.value["op"] for e in sent if e.value is not None}
    assert ops == {"r", "c", "u", "d"}
    assert any(e.value is None for e in sent)  # tombstones after deletes
    messages = [e.message() for e in sent if e.value is not None]
    assert len(messages) > len(set(messages))  # re-sent duplicates
    lsns = [e.lsn for e in sent if e.lsn is not None]
    assert lsns != sorted(lsns)  # out of commit order
    ones = [e.value["op"] for e in shop.log if e.key == {"customer_id": 1} and e.value]
    assert ones[-2:] == ["d", "c"]  # deleted, then created again


def test_envelopes_replay_into_the_database() -> None:
    """Applying the delivered events by LSN (newest per key wins) gives the final rows."""
    shop = produce.simulate(7)
    newest: dict[tuple, dict] = {}
    for event in produce.delivered(shop.log, 8):
        key = (event.table, *event.key.values())
        if event.value is not None and event.lsn > newest.get(key, {"lsn": -1})["lsn"]:
            newest[key] = {"lsn": event.lsn, "row": event.value["after"]}
    for table, rows in shop.rows.items():
        replayed = {k[1]: v["row"] for k, v in newest.items() if k[0] == table and v["row"]}
        assert replayed == rows


# ---------------------------------------------------------------------------- the pipeline


def _records(events: list) -> list[dict]:
    """The events as ``lf.read_kafka`` gives them: bytes, offsets counted per topic."""
    offsets: dict[str, int] = {}
    records = []
    for event in events:
        key, value = event.message()
        offset = offsets[event.topic] = offsets.get(event.topic, -1) + 1
        stamp = event.value["ts_ms"] if event.value else produce.START_MS
        records.append(
            {
                "key": key.encode(),
                "value": value.encode() if value is not None else None,
                "topic": event.topic,
                "partition": 0,
                "offset": offset,
                "timestamp": datetime.fromtimestamp(stamp / 1000, UTC),
                "timestampType": 0,
            }
        )
    return records


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory: pytest.TempPathFactory):
    shop = produce.simulate(7)
    records = _records(produce.delivered(shop.log, 8))
    pipe = PipelineTest(EXAMPLE, tmp_path_factory.mktemp("cdc_example"), spark=spark)
    half = len(records) // 2
    pipe.feed("bronze_changes", records[:half])
    pipe.feed("bronze_changes", records[half:])  # late events meet what the first one wrote
    pipe.step()
    return pipe, shop, records


@pytest.mark.spark
def test_bronze_keeps_every_record(run) -> None:
    pipe, _shop, records = run
    bronze = pipe.rows("bronze_changes", ["topic", "offset"])
    assert len(bronze) == len(records)
    first = json.loads(records[0]["value"])
    row = next(r for r in bronze if r["offset"] == 0 and r["topic"] == records[0]["topic"])
    assert (row["op"], row["lsn"], row["table"]) == ("r", first["source"]["lsn"], "customers")
    assert json.loads(row["after"]) == first["after"]


@pytest.mark.spark
def test_customers_are_the_current_rows(run) -> None:
    pipe, shop, _ = run
    current = [{c: r[c] for c in CUSTOMER} for r in pipe.rows("customers", ["customer_id"])]
    assert current == [shop.rows["customers"][k] for k in sorted(shop.rows["customers"])]


@pytest.mark.spark
def test_customers_history_has_a_version_per_change(run) -> None:
    """One version per create/update of a customer, in commit order, closed by the next change
    or the delete (``__START_AT``/``__END_AT`` are LSNs)."""
    pipe, shop, _ = run
    expected: list[dict] = []
    open_: dict[int, dict] = {}
    for event in (e for e in shop.log if e.table == "customers" and e.value is not None):
        key = event.key["customer_id"]
        if key in open_:
            open_.pop(key)["__END_AT"] = event.lsn
        if event.value["op"] != "d":
            open_[key] = {**event.value["after"], "__START_AT": event.lsn, "__END_AT": None}
            expected.append(open_[key])
    history = pipe.rows("customers_history", ["customer_id", "__START_AT"])
    fields = (*CUSTOMER, "__START_AT", "__END_AT")
    got = [{f: r[f] for f in fields} for r in history]
    assert got == sorted(expected, key=lambda r: (r["customer_id"], r["__START_AT"]))
    assert sum(r["customer_id"] == 1 and r["__END_AT"] is not None for r in got) >= 1


@pytest.mark.spark
def test_gold_joins_orders_to_the_current_customer(run) -> None:
    pipe, shop, _ = run
    customers = shop.rows["customers"]
    expected = [
        {**order, **{c: (customers.get(order["customer_id"]) or {}).get(c) for c in CUSTOMER[1:]}}
        for _, order in sorted(shop.rows["orders"].items())
    ]
    gold = pipe.rows("customer_orders", ["order_id"])
    assert [dict(sorted(r.items())) for r in gold] == [dict(sorted(r.items())) for r in expected]
