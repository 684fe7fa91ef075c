"""A real PostgreSQL server for the tests: Debian's binaries, a fresh cluster, 127.0.0.1 only.

``./dev setup`` installs Debian's ``postgresql`` package; the server runs as the ``postgres``
user when the tests run as root (PostgreSQL refuses to run as root), in a data folder of its own.
Each test takes a fresh database (``create_database``), so tests never see each other's tables.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.net import free_port

USER = "lakefeed"


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        raise RuntimeError(
            "PostgreSQL's server binaries are missing: `./dev setup` installs Debian's "
            "postgresql package (apt-get install postgresql)"
        )
    return Path(found[-1]).parent


class Postgres:
    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.folder = Path(tempfile.mkdtemp(prefix="lakefeed-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self._names = itertools.count()

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def start(self) -> Postgres:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "--no-sync")
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} "
            f"-c unix_socket_directories={self.folder} -c fsync=off"
        )
        log = str(self.folder / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")
        return self

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"test_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)
