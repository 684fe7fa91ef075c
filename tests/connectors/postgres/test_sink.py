"""The PostgreSQL sink against a real server: upserts, appends, replays, refusals."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pyarrow as pa
import pytest

from lakefeed.connectors import postgres as pg
from lakefeed.core.errors import DataLossRiskError, code_of, is_permanent

CUSTOMERS = (
    "CREATE TABLE customers (id bigint PRIMARY KEY, name text, seen timestamptz, "
    "spent numeric(10, 2) DEFAULT 0)"
)


@pytest.fixture
def url(postgres) -> str:  # noqa: ANN001 - tests.support.postgres.Postgres
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(CUSTOMERS)
        conn.execute("CREATE TABLE clicks (id bigint, page text)")
    return url


def _rows(url: str, query: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def _batch(ids: list[int], names: list[str]) -> pa.Table:
    seen = [datetime(2026, 1, 1, tzinfo=UTC)] * len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "name": names, "seen": seen})


def test_upserts_each_batch_once_and_skips_a_replay(url: str) -> None:
    target = pg.PostgresTarget(url, "customers", ["id"])
    pg.check_target(target, ["id", "name", "seen"])
    assert pg.write_batch(target, "q1", 0, _batch([1, 2], ["ann", "bob"])) == 2
    assert pg.write_batch(target, "q1", 1, _batch([2, 3], ["bea", "cid"])) == 2
    # Spark replays batch 1 after a crash (with other rows, even): nothing changes
    assert pg.write_batch(target, "q1", 1, _batch([2], ["zed"])) is None
    rows = _rows(url, "SELECT id, name, spent FROM customers ORDER BY id")
    assert [(i, n) for i, n, _ in rows] == [(1, "ann"), (2, "bea"), (3, "cid")]
    assert all(spent == 0 for _, _, spent in rows)  # columns not written keep their default
    assert pg.sink.last_batch(target, "q1") == 1
    assert pg.sink.last_batch(target, "another query") is None


def test_appends_without_keys(url: str) -> None:
    target = pg.PostgresTarget(url, "public.clicks")
    clicks = pa.table({"id": pa.array([1, 1], pa.int64()), "page": ["/a", "/b"]})
    assert pg.write_batch(target, "q", 0, clicks) == 2
    assert pg.write_batch(target, "q", 0, clicks) is None
    assert _rows(url, "SELECT count(*) FROM clicks") == [(2,)]


def test_several_rows_for_one_key_are_refused_and_nothing_is_written(url: str) -> None:
    target = pg.PostgresTarget(url, "customers", ["id"])
    with pytest.raises(pg.sink.ConfigError) as caught:
        pg.write_batch(target, "q", 0, _batch([7, 7], ["a", "b"]))
    assert code_of(caught.value) == "POSTGRES_DUPLICATE_KEYS" and is_permanent(caught.value)
    assert "{'id': 7}" in str(caught.value)
    assert _rows(url, "SELECT count(*) FROM customers") == [(0,)]
    assert pg.sink.last_batch(target, "q") is None


@pytest.mark.parametrize(
    ("table", "keys", "columns", "expected"),
    [
        ("nope", ["id"], ["id"], "does not exist"),
        ("customers", ["id"], ["id", "email"], "has no column(s) ['email']"),
        ("customers", ["name"], ["id", "name"], "need a primary key or unique index"),
        ("clicks", ["id"], ["id"], "need a primary key or unique index"),
    ],
)
def test_targets_that_cannot_work_are_refused_before_a_batch(
    url: str, table: str, keys: list[str], columns: list[str], expected: str
) -> None:
    with pytest.raises(pg.sink.ConfigError) as caught:
        pg.check_target(pg.PostgresTarget(url, table, keys), columns)
    assert expected in str(caught.value) and code_of(caught.value) == "POSTGRES_TARGET"


def test_an_unreachable_server_is_transient_and_its_password_never_shown(postgres) -> None:  # noqa: ANN001
    dead = postgres.url().replace(f":{postgres.port}/", ":1/").replace("lakefeed@", "u:hunter2@")
    target = pg.PostgresTarget(dead, "customers", ["id"])
    with pytest.raises(pg.sink.UnavailableError) as caught:
        pg.check_target(target, ["id"])
    assert code_of(caught.value) == "POSTGRES_UNAVAILABLE" and not is_permanent(caught.value)
    assert "hunter2" not in str(caught.value) and "127.0.0.1" in str(caught.value)
    assert "hunter2" not in repr(target)


def test_bad_table_names_are_refused() -> None:
    with pytest.raises(pg.sink.ConfigError, match="not a plain name"):
        pg.PostgresTarget("postgresql://x@127.0.0.1/db", "customers; DROP TABLE x")


# -- a checkpoint behind the commit table -------------------------------------------------------


def test_a_replay_over_its_own_offsets_is_skipped_other_offsets_are_refused(url: str) -> None:
    target = pg.PostgresTarget(url, "customers", ["id"])
    assert pg.write_batch(target, "q", 0, _batch([1], ["ann"]), "h0") == 1
    assert pg.write_batch(target, "q", 1, _batch([2], ["bob"]), "h1") == 1
    assert pg.write_batch(target, "q", 1, _batch([2], ["bob"]), "h1") is None  # a replay
    # A checkpoint restored from a backup plans batch 1 again over a grown source, or batch 0:
    # refused before anything is written, not skipped with its rows.
    for batch_id, offsets in ((1, "h1-grown"), (0, "h0")):
        with pytest.raises(DataLossRiskError) as refused:
            pg.write_batch(target, "q", batch_id, _batch([3], ["cid"]), offsets)
        assert code_of(refused.value) == "CHECKPOINT_BEHIND_TABLE"
        assert is_permanent(refused.value) and refused.value.fix
    assert "over other source offsets" in str(_refusal(target, 1, "h1-grown"))
    assert "holds batches up to 1" in str(_refusal(target, 0, "h0"))
    assert _rows(url, "SELECT id FROM customers ORDER BY id") == [(1,), (2,)]
    assert pg.write_batch(target, "q", 2, _batch([3], ["cid"]), "h2") == 1
    # A writer that knows no checkpoint (no offsets) is judged by the batch id, as before.
    assert pg.write_batch(target, "q", 1, _batch([9], ["zed"])) is None


def _refusal(target: pg.PostgresTarget, batch_id: int, offsets: str) -> DataLossRiskError:
    with pytest.raises(DataLossRiskError) as refused:
        pg.write_batch(target, "q", batch_id, _batch([3], ["cid"]), offsets)
    return refused.value


def test_a_commit_table_of_an_older_version_is_read_as_before(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:  # as versions without the hash made it
        conn.execute(
            "CREATE TABLE lakefeed_sink_commits (app_id text PRIMARY KEY, batch_id bigint NOT "
            "NULL, committed_at timestamptz NOT NULL)"
        )
        conn.execute("INSERT INTO lakefeed_sink_commits VALUES ('q', 4, now())")
    target = pg.PostgresTarget(url, "customers", ["id"])
    assert pg.write_batch(target, "q", 4, _batch([1], ["ann"]), "h4") is None  # no hash: a replay
    assert pg.write_batch(target, "q", 5, _batch([1], ["ann"]), "h5") == 1
    assert _rows(url, "SELECT batch_id, source_offsets FROM lakefeed_sink_commits") == [(5, "h5")]
