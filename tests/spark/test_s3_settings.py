"""S3 settings per location, Spark-free: options > Spark's Hadoop conf (per-bucket first) >
AWS environment, and how they travel to other processes (``lakefeed.core.storage``)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from lakefeed.connectors.files.options import FileSourceOptions
from lakefeed.core import storage
from lakefeed.core.storage import S3Settings

SECRET = "opt-secret-4f1c"


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(storage, "_REGISTERED", {})
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "env-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    yield


def test_options_win_over_spark_conf_which_wins_over_the_environment() -> None:
    assert storage.settings_for("s3://b/t") == S3Settings(
        None, "eu-west-1", "env-key", "env-secret"
    )
    assert storage.delta_options("s3://b/t") is None  # nothing registered: delta-rs reads env
    storage.register(
        None, {"fs.s3a.endpoint": "conf:9000", "fs.s3a.connection.ssl.enabled": "false"}
    )
    storage.register(
        None, {**storage._REGISTERED[""], "fs.s3a.bucket.b.endpoint.region": "bucket-r"}
    )
    conf = storage.settings_for("s3a://b/t")
    assert (conf.endpoint, conf.region, conf.access_key) == (
        "http://conf:9000",
        "bucket-r",
        "env-key",
    )
    assert storage.settings_for("s3://other/t").region == "eu-west-1"  # per-bucket: only b
    given = {
        "fs.s3a.access.key": "opt-key",
        "fs.s3a.secret.key": SECRET,
        "FS.S3A.ENDPOINT": "https://o",
    }
    storage.register("s3://b/t", storage.hadoop_options({**given, "mergeSchema": "true"}))
    for under in ("s3a://b/t", "s3://b/t/_delta_log/0.json"):
        found = storage.settings_for(under)
        assert (found.endpoint, found.region) == ("https://o", "bucket-r")
        assert (found.access_key, found.secret_key, found.session_token) == (
            "opt-key",
            SECRET,
            None,
        )
    assert storage.settings_for("s3://b/t2").access_key == "env-key"  # a prefix, not a string start
    assert storage.delta_options("s3://b/t") == {
        "AWS_ENDPOINT_URL": "https://o",
        "AWS_REGION": "bucket-r",
        "AWS_ACCESS_KEY_ID": "opt-key",
        "AWS_SECRET_ACCESS_KEY": SECRET,
    }
    assert SECRET not in repr(storage.settings_for("s3://b/t"))
    assert storage.given("/local/t") == {}


def test_a_plain_http_endpoint_lets_delta_rs_use_http() -> None:
    settings = S3Settings.from_hadoop({"fs.s3a.endpoint": "http://127.0.0.1:9"})
    assert settings.storage_options()["AWS_ALLOW_HTTP"] == "true"


def test_keys_are_never_mixed_across_sources() -> None:
    storage.register("s3://b", {"fs.s3a.endpoint": "https://e"})  # no keys: the env's pair
    assert storage.settings_for("s3://b/x").access_key == "env-key"
    token = S3Settings(access_key="k", secret_key="s", session_token="t")
    assert S3Settings(access_key="k2", secret_key="s2").over(token).session_token is None


def test_settings_travel_with_a_pickled_reader_to_another_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = FileSourceOptions.parse(
        {
            "path": "s3://land/in",
            "cloudFiles.format": "json",
            "cloudFiles.schemaLocation": "s3://state/schemas",
            "fs.s3a.access.key": "opt-key",
            "fs.s3a.secret.key": SECRET,
        }
    )
    assert SECRET not in repr(options)
    shipped = pickle.dumps(options)
    storage._REGISTERED.clear()  # what an executor starts with: no registry, its own env
    monkeypatch.delenv("AWS_REGION")
    pickle.loads(shipped)
    assert storage.settings_for("s3://land/in/a.json").secret_key == SECRET
    assert storage.settings_for("s3://land/in").region == "eu-west-1"  # the driver's, as S3A
    assert storage.settings_for("s3://state/schemas/_schemas/0").secret_key == SECRET


def test_a_pipelines_sink_on_s3_counts_before_the_session_starts(tmp_path) -> None:
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.entry import storage_locations
    from lakefeed.pipeline.api import Pipeline, create_sink, loading
    from lakefeed.spark import s3a

    pipeline = Pipeline("p")
    with loading(pipeline):
        create_sink("out", "delta", {"path": "s3://bucket/out"})
    places = storage_locations(pipeline, Lakehouse.at(tmp_path / "lh"))
    assert "s3://bucket/out" in places and s3a.uses_object_store(places)


DLT_FLOW = """
import dlt

@dlt.table
def raw_events():
    return (spark.readStream.format("cloudFiles").option("cloudFiles.format", "json")
            .option("cloudFiles.schemaLocation", "s3a://state/schemas/raw")
            .load("s3://landing/events"))
"""


def test_landing_folders_flows_name_count_before_the_session_starts(tmp_path) -> None:
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.entry import load, storage_locations

    (tmp_path / "dlt_flow.py").write_text(DLT_FLOW)
    examples = Path(__file__).resolve().parents[2] / "examples"
    pipeline = load(
        [str(examples / "file_ingest" / "pipeline.py"), str(tmp_path / "dlt_flow.py")],
        {"files.landing": "s3://bucket/landing"},
    )
    places = storage_locations(pipeline, Lakehouse.at(tmp_path / "lh"))
    assert places[0] == str(tmp_path / "lh")
    assert set(places[1:]) == {
        "s3://bucket/landing", "s3a://state/schemas/raw", "s3://landing/events"
    }  # fmt: skip


FLOW_THAT_CANNOT_RUN = """
import lakefeed as lf

ORDERS = "s3://tables/orders/"

@lf.table
def orders():
    raise RuntimeError("never run before the session")
    return lf.source("delta", path=ORDERS)
"""


def test_locations_are_read_from_the_pipeline_text_without_running_it(tmp_path) -> None:
    from lakefeed.core.lakehouse import Lakehouse
    from lakefeed.entry import load, storage_locations

    (tmp_path / "orders.py").write_text(FLOW_THAT_CANNOT_RUN)
    pipeline = load([str(tmp_path / "orders.py")], {})
    assert storage_locations(pipeline, Lakehouse.at(tmp_path))[1:] == ["s3://tables/orders"]


def test_resolved_settings_are_cached_until_the_registry_or_environment_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = storage.settings_for("s3://b/t/part-0.parquet")
    assert storage.settings_for("s3://b/t/part-0.parquet") is first  # cached
    storage.register("s3://b/t", {"fs.s3a.endpoint.region": "table-r"})
    assert storage.settings_for("s3://b/t/part-0.parquet").region == "table-r"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "rotated")
    assert storage.settings_for("s3://b/t/part-0.parquet").access_key == "rotated"
    storage._REGISTERED.clear()  # what a test or a fresh registry does without register()
    assert storage.settings_for("s3://b/t/part-0.parquet").region == "eu-west-1"
