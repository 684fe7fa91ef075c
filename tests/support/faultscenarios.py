"""The pipelines fault trials drive, each with the input it is fed and how its rows are counted:
the IoT example (generator → bronze → silver → gold), a Kafka → Delta flow (the kafka_ingest
example on a tansu topic), AUTO CDC (the cdc example: Debezium events → SCD1/SCD2 targets) and a
Delta sink filled by an append flow."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from tests.support.faultlab import IOT_CONF, ROOT, Count, Lab, Scenario, table

EXAMPLES = ROOT / "examples"
SINK_PIPELINE = Path(__file__).with_name("fault_sink_pipeline.py")
IOT_ROWS = int(IOT_CONF["iot.totalRows"])
KAFKA_MESSAGES = 2000


def distinct(data: pa.Table, columns: list[str]) -> int:
    return data.group_by(columns).aggregate([]).num_rows


def count_keys(name: str, data: pa.Table, columns: list[str], expected: int) -> Count:
    return Count(name, expected, data.num_rows, distinct(data, columns))


def iot_conf(lab: Lab, lakehouse: str) -> dict[str, str]:
    return dict(IOT_CONF)


def iot_count(lab: Lab, readback: str, conf: dict[str, str]) -> list[Count]:
    bronze = table(readback, "bronze_readings").to_pyarrow_table(columns=["offset"])
    return [count_keys("bronze_readings", bronze, ["offset"], IOT_ROWS)]


def _kafka_topic(lab: Lab) -> str:
    """One topic per lab, filled once: each trial reads it from the start into a new lakehouse."""
    if "kafka" not in lab.topics:
        broker = lab.broker
        topic = broker.create_topic(partitions=2)  # type: ignore[attr-defined]
        values = [
            json.dumps({"event_id": f"e{i}", "device_id": f"d{i % 7}", "temperature": 20.5,
                        "humidity": 40.0, "battery": 90.0, "event_time": "2026-01-01T00:00:00Z"})
            for i in range(KAFKA_MESSAGES)
        ]  # fmt: skip
        broker.produce(topic, values, keys=[f"d{i % 7}" for i in range(KAFKA_MESSAGES)])  # type: ignore[attr-defined]
        lab.topics["kafka"] = topic
    return str(lab.topics["kafka"])


def kafka_conf(lab: Lab, lakehouse: str) -> dict[str, str]:
    return {
        "kafka.bootstrap": lab.broker.bootstrap,  # type: ignore[attr-defined]
        "kafka.topic": _kafka_topic(lab),
        "kafka.maxOffsetsPerTrigger": "700",
    }


def kafka_count(lab: Lab, readback: str, conf: dict[str, str]) -> list[Count]:
    bronze = table(readback, "bronze_kafka").to_pyarrow_table(columns=["partition", "offset"])
    return [count_keys("bronze_kafka", bronze, ["partition", "offset"], KAFKA_MESSAGES)]


def _produce_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cdc_produce", EXAMPLES / "cdc" / "produce.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _cdc_shop(lab: Lab) -> dict[str, object]:
    """The example's shop, sent once per lab to its two topics (the example's fixed names)."""
    if "cdc" not in lab.topics:
        produce = _produce_module()
        shop = produce.simulate(seed=7)
        sent = produce.send(produce.delivered(shop.log, seed=7), lab.broker.bootstrap)  # type: ignore[attr-defined]
        lab.topics["cdc"] = {"sent": sent, "rows": shop.rows}
    return lab.topics["cdc"]  # type: ignore[return-value]


def cdc_conf(lab: Lab, lakehouse: str) -> dict[str, str]:
    _cdc_shop(lab)
    return {"cdc.bootstrap": lab.broker.bootstrap}  # type: ignore[attr-defined]


def cdc_count(lab: Lab, readback: str, conf: dict[str, str]) -> list[Count]:
    shop = _cdc_shop(lab)
    bronze = table(readback, "bronze_changes").to_pyarrow_table()
    counts = [count_keys("bronze_changes", bronze, ["topic", "partition", "offset"], shop["sent"])]
    rows: dict[str, dict[int, object]] = shop["rows"]  # type: ignore[assignment]
    for target, key in (("customers", "customer_id"), ("orders", "order_id")):
        data = table(readback, target).to_pyarrow_table()
        found = set(data[key].to_pylist())
        wanted = set(rows[target])
        # a key the source no longer holds is a row too many; one missing, a row lost
        extra = data.num_rows - len(found & wanted)
        counts.append(Count(target, len(wanted), len(found & wanted) + extra, len(found & wanted)))
    return counts


def sink_conf(lab: Lab, lakehouse: str) -> dict[str, str]:
    return {**IOT_CONF, "sink.path": f"{lakehouse}/export"}


def sink_count(lab: Lab, readback: str, conf: dict[str, str]) -> list[Count]:
    data = DeltaTable(f"{readback}/export").to_pyarrow_table(columns=["offset"])
    assert pc.min(data["offset"]).as_py() >= 0
    return [count_keys("export (sink)", data, ["offset"], IOT_ROWS)]


SCENARIOS = {
    "iot": Scenario("iot", EXAMPLES / "iot" / "pipeline.py", iot_conf, iot_count),
    "kafka": Scenario(
        "kafka", EXAMPLES / "kafka_ingest" / "pipeline.py", kafka_conf, kafka_count, True
    ),
    "cdc": Scenario("cdc", EXAMPLES / "cdc" / "pipeline.py", cdc_conf, cdc_count, True),
    "sink": Scenario("sink", SINK_PIPELINE, sink_conf, sink_count),
}
