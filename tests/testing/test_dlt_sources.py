"""lakefeed.testing feeds sources a DLT file reads itself: ``spark.readStream.format("kafka")``
and ``format("cloudFiles")``, the file taken as Databricks documents it, unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakefeed.core.errors import ConfigError
from lakefeed.testing import PipelineTest

PIPELINES = Path(__file__).resolve().parent / "pipelines"
pytestmark = pytest.mark.compat  # the files read with pyspark's readStream.format(...)


def _record(topic: str, offset: int, value: str) -> dict:
    return {"topic": topic, "partition": 0, "offset": offset, "value": value.encode()}


def _payment(payment_id: str, amount: float | None) -> str:
    return json.dumps({"payment_id": payment_id, "amount": amount})


def test_a_kafka_read_of_a_dlt_file_is_fed(spark, tmp_path: Path) -> None:
    pipe = PipelineTest(PIPELINES / "dlt_kafka", tmp_path, spark=spark)
    pipe.feed("payments_raw", [_record("payments", 0, _payment("p0", 12.5))])
    pipe.feed("payments_raw", [_record("payments", 1, _payment("p1", None))])  # dropped
    pipe.feed("ledger", [_record("charges", 0, "charge 1")], source="charges")
    pipe.feed("ledger", [_record("refunds", 0, "refund 1")])  # the flow's other sources
    pipe.step()

    assert pipe.rows("payments") == [{"offset": 0, "payment_id": "p0", "amount": 12.5}]
    assert pipe.expectations("payments")["has_amount"] == {"passed": 1, "failed": 1}
    assert pipe.rows("ledger", ["topic"]) == [
        {"topic": "charges", "entry": "charge 1"},
        {"topic": "refunds", "entry": "refund 1"},
    ]  # a topic fed by name, the rest by the flow's feed: no row twice

    pipe.feed("payments_raw", [_record("payments", 2, _payment("p2", 3.0))])
    pipe.step()
    assert [r["payment_id"] for r in pipe.rows("payments", ["offset"])] == ["p0", "p2"]


def test_an_auto_loader_read_of_a_dlt_file_is_fed(spark, tmp_path: Path) -> None:
    landing = tmp_path / "landing"  # empty: the file's schema is fixed with .schema(...)
    landing.mkdir()
    pipe = PipelineTest(
        PIPELINES / "dlt_cloudfiles", tmp_path, spark=spark, conf={"shop.landing": str(landing)}
    )
    pipe.feed("orders_raw", [{"order_id": 1, "customer": "ann", "amount": 30.0}])
    pipe.feed("orders_raw", [{"order_id": 2, "customer": "ann", "amount": -1.0}])  # dropped
    pipe.feed("orders_raw", [{"order_id": 3, "customer": "bo", "amount": 5.0}])
    pipe.step()

    assert [r["order_id"] for r in pipe.rows("orders", ["order_id"])] == [1, 3]
    assert pipe.rows("spend", ["customer"]) == [
        {"customer": "ann", "sum(amount)": 30.0},
        {"customer": "bo", "sum(amount)": 5.0},
    ]


def test_a_source_named_by_its_path_is_fed(spark, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    pipe = PipelineTest(
        PIPELINES / "dlt_cloudfiles", tmp_path, spark=spark, conf={"shop.landing": str(landing)}
    )
    pipe.feed("orders_raw", [{"order_id": 7, "customer": "cy", "amount": 1.0}], source=str(landing))
    pipe.step()
    assert [r["order_id"] for r in pipe.rows("orders")] == [7]


def test_a_source_the_flow_does_not_read_is_refused(spark, tmp_path: Path) -> None:
    pipe = PipelineTest(PIPELINES / "dlt_kafka", tmp_path, spark=spark)
    pipe.feed("ledger", [_record("chargebacks", 0, "x")], source="chargebacks")
    with pytest.raises(ConfigError, match="no source 'chargebacks'"):
        pipe.step()
