"""Spark's JDBC writer into PostgreSQL, with the driver jar from Maven Central."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pyarrow as pa
from deltalake import write_deltalake

from tests.support.postgres import USER

ROOT = Path(__file__).resolve().parents[3]


def test_foreach_batch_jdbc_writes_through_the_maven_driver(postgres, tmp_path: Path) -> None:  # noqa: ANN001
    url = postgres.create_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id bigint)")
    for start in (0, 10):
        ids = pa.array(range(start, start + 10), pa.int64())
        write_deltalake(str(tmp_path / "src"), pa.table({"id": ids}), mode="append")
    jdbc = url.replace(f"postgresql://{USER}@", "jdbc:postgresql://") + f"?user={USER}"
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("jdbc_driver.py")), str(tmp_path), jdbc],
        capture_output=True,
        text=True,
        timeout=420,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with psycopg.connect(url) as conn:
        ids = sorted(r[0] for r in conn.execute("SELECT id FROM events").fetchall())
    assert ids == list(range(20))
