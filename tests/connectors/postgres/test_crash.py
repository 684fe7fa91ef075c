"""Exactly-once into PostgreSQL under kill -9: a pipeline's ``postgres`` sink flow killed and
restarted (the driver runs ``lf.run`` on a pipeline with ``lf.create_sink``)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.support.crash import kill_soon_after_progress, run_driver_with_kills

COMMITS = 8
ROWS = 50

pytestmark = [pytest.mark.crash, pytest.mark.timeout(1200)]


def _count(url: str) -> int:
    try:
        with psycopg.connect(url) as conn:
            return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    except psycopg.Error:
        return 0


def test_postgres_sink_survives_sigkill_exactly_once(postgres, tmp_path: Path) -> None:  # noqa: ANN001
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id bigint, v text)")
    for c in range(COMMITS):
        ids = list(range(c * ROWS, (c + 1) * ROWS))
        table = pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]})
        write_deltalake(str(tmp_path / "src"), table, mode="append")
    report = run_driver_with_kills(
        Path(__file__).with_name("crash_driver.py"),
        tmp_path,
        url,
        workdir=tmp_path,
        kills=4,
        kill_when=kill_soon_after_progress(lambda: _count(url), seed=3, within=1.0, spare={1}),
        min_delay=180,
        max_delay=180,
        final_timeout=600,
    )
    assert report.kills == 3 and report.runs == 5
    with psycopg.connect(url) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM events ORDER BY id").fetchall()]
        replays = conn.execute("SELECT count(*) FROM lakefeed_sink_commits").fetchone()[0]
    assert ids == list(range(COMMITS * ROWS))  # every row once: none lost, none twice
    assert replays == 1  # one query, one record of its last batch
